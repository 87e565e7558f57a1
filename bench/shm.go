package main

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// inside holds one "how many owners are inside the critical section" counter
// per lock name, and after them one count of every grant made (peer.go reads
// it to tell how many grants another waiter waited through). In one process it is plain memory; across processes it is a
// file mapped MAP_SHARED by all of them, so atomic adds on it are seen by
// every process and a second holder of the same name is caught wherever it
// runs.
type inside struct {
	cells []int64
	unmap func()
}

// newInside returns n counters in this process only.
func newInside(n int) *inside {
	return &inside{cells: make([]int64, n+1), unmap: func() {}}
}

// createSharedInside creates a file of n zeroed counters for child processes
// to map, and maps it here too.
func createSharedInside(n int) (path string, in *inside, err error) {
	f, err := os.CreateTemp("", "lockactor-bench-inside-")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	if err := f.Truncate(int64(8 * (n + 1))); err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	in, err = mapInside(f, n)
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), in, nil
}

// openSharedInside maps the parent's counter file.
func openSharedInside(path string, n int) (*inside, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mapInside(f, n)
}

func mapInside(f *os.File, n int) (*inside, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, 8*(n+1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	cells := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), n+1)
	return &inside{cells: cells, unmap: func() { _ = syscall.Munmap(b) }}, nil
}

// enter marks one more holder of key i and reports whether it is alone; it
// counts the grant.
func (in *inside) enter(i int) bool {
	atomic.AddInt64(&in.cells[len(in.cells)-1], 1)
	return atomic.AddInt64(&in.cells[i], 1) == 1
}

// grants is how many grants enter has counted, in every process.
func (in *inside) grants() int64 { return atomic.LoadInt64(&in.cells[len(in.cells)-1]) }

// exit marks the holder of key i gone.
func (in *inside) exit(i int) { atomic.AddInt64(&in.cells[i], -1) }

// close unmaps shared memory.
func (in *inside) close() { in.unmap() }
