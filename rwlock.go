package lockactor

import (
	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
)

// A ReadWriteLock is ONE owner with two views that share its owner id, as a
// Java thread does in Redisson (RedissonReadWriteLock): many readers or one
// writer. The write view may also take the read lock (write-then-read
// reentry), and unlocking the write view afterwards downgrades to a read
// hold. Read-then-write upgrade is impossible: the write view's Lock/TryLock
// returns an error matching ErrInvalidArgument at once when this owner holds
// read holds, instead of waiting for itself. Call Client.ReadWriteLock once
// per owner (per goroutine that needs exclusion).
//
// Within one Client a waiting writer holds later readers back, as in
// sync.RWMutex: a read Lock waits behind it and a read TryLock returns
// false, unless its owner already holds a view (reentry, write-then-read).
// Other Clients' readers are granted by Redis whenever the lock is in read
// mode, as with Redisson.
type ReadWriteLock struct {
	read, write *Lock
}

// ReadWriteLock returns a new owner of the read-write lock name. Each read
// hold also writes a key {name}:<owner>:rwlock_timeout:<i> with its lease, as
// Redisson does, so readers on Java clients can tell live readers apart.
func (c *Client) ReadWriteLock(name string) *ReadWriteLock {
	owner := c.newOwner()
	key := actors.Key{Kind: actors.KindRW, Name: name}
	return &ReadWriteLock{
		read:  &Lock{c: c, name: name, key: key, owner: owner, mode: messages.Read},
		write: &Lock{c: c, name: name, key: key, owner: owner, mode: messages.Write},
	}
}

// ReadLock is this owner's read view (the same *Lock on each call).
func (rw *ReadWriteLock) ReadLock() *Lock { return rw.read }

// WriteLock is this owner's write view (the same *Lock on each call).
func (rw *ReadWriteLock) WriteLock() *Lock { return rw.write }
