package actors

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The runtime's side of the seam (env.go): the wall clock, and protoactor
// running each actor's mailbox on the worker pool (dispatcher.go). This
// file and the pool are the only code of the package that reads the wall
// clock or arms its timers; everything else asks the scheduler.

// epoch anchors Group.ValidUntil on the monotonic clock.
var epoch = time.Now()

// wallClock is the runtime's clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }

// protoScheduler runs actors as protoactor actors on a worker pool.
type protoScheduler struct {
	wallClock
	system  *actor.ActorSystem
	workers *workerPool
}

func newProtoScheduler(log *slog.Logger) *protoScheduler {
	system := actor.NewActorSystem(
		// protoactor narrates its lifecycle at INFO; only its warnings and
		// errors reach the Client's logger.
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(minLevel{log.Handler(), slog.LevelWarn})
		}),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	return &protoScheduler{system: system, workers: newWorkerPool(300)}
}

func (s *protoScheduler) spawn(m machine) mailbox {
	root := s.system.Root
	props := actor.PropsFromProducer(func() actor.Actor { return &protoActor{m: m, root: root} },
		actor.WithDispatcher(s.workers))
	return protoMailbox{pid: root.Spawn(props), root: root}
}

func (s *protoScheduler) shutdown(deadline time.Time) {
	s.workers.close(deadline)
	s.system.Shutdown()
}

// protoActor adapts a machine to protoactor: its lifecycle messages
// become the seam's.
type protoActor struct {
	m    machine
	root *actor.RootContext
}

var (
	stoppingMsg = &stopping{}
	stoppedMsg  = &stopped{}
)

func (p *protoActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.m.receive(&started{box: protoMailbox{pid: ctx.Self(), root: p.root}})
	case *actor.Stopping:
		p.m.receive(stoppingMsg)
	case *actor.Stopped:
		p.m.receive(stoppedMsg)
	case actor.SystemMessage, actor.AutoReceiveMessage:
		// protoactor's own (Restarting, ...): nothing for a machine.
	default:
		p.m.receive(msg)
	}
}

// protoMailbox is an actor's protoactor address.
type protoMailbox struct {
	pid  *actor.PID
	root *actor.RootContext
}

func (b protoMailbox) post(msg any) { b.root.Send(b.pid, msg) }
func (b protoMailbox) poison()      { b.root.Poison(b.pid) }
func (b protoMailbox) stop()        { b.root.Stop(b.pid) }
