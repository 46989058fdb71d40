package sharded

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Unit is one Lease's worth of work.
type Unit struct {
	// Name is appended to the main Lease name to name the unit's Lease.
	Name string
	// Weight is the unit's relative amount of work.
	Weight int
	// Run runs the unit until ctx ends and returns soon after; it is
	// called again each time the Lease is acquired again.
	Run func(ctx context.Context)
}

// Config configures a Coordinator.
type Config struct {
	// Client reaches the apiserver for Leases; its requests should time
	// out before RenewDeadline.
	Client    clientset.Interface
	Namespace string
	// Name is the main Lease (--leader-elect-resource-name).
	Name     string
	Identity string

	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	EventRecorder rl.EventRecorder
	Units         []Unit
	// StopTimeout bounds how long a stopping unit is waited for before its
	// Lease is released (0: forever). A unit still running then keeps its
	// Lease renewed while leaving on shutdown lets it expire.
	StopTimeout time.Duration
	// Policy defaults from the lease timings when zero.
	Policy Policy
}

// GroupIdentity is the holder of the main Lease while sharded replicas
// run: all of them renew it under this one identity, so a replica of the
// upstream binary (which knows only the main Lease) stays standby while any
// of them works, and none of them runs anything while such a replica
// holds it.
func GroupIdentity(name string) string { return name + "-sharded-replicas" }

// UnitLeaseName is the Lease of a unit.
func UnitLeaseName(name, unit string) string { return name + "-" + unit }

// MemberLeaseName is the membership Lease of a replica.
func MemberLeaseName(name, identity string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity))
	return fmt.Sprintf("%s-replica-%08x", name, h.Sum32())
}

func memberPrefix(name string) string { return name + "-replica-" }

// Coordinator runs units of work across replicas, each under its own Lease.
type Coordinator struct {
	cfg     Config
	clock   clock.Clock
	tracker *tracker
	units   map[string]*unitRun
	// started is when the Lease cache synced; members present then count at once.
	started time.Time

	mu sync.Mutex
	// gate is open (non-nil, not done) while this replica renews the main
	// Lease under the group identity; units run only inside it.
	gate context.Context
	// firstSeen is when each member identity was first seen live.
	firstSeen map[string]time.Time
}

type unitState int

const (
	idle unitState = iota
	campaigning
	leading
	releasing
)

type unitRun struct {
	unit      Unit
	lease     string
	watchdog  *leaderelection.HealthzAdaptor
	mu        sync.Mutex
	state     unitState
	heldSince time.Time
	// stop ends the campaign or the leading; done is closed when the
	// unit's Run has returned and its Lease is released or lost.
	stop context.CancelFunc
	done chan struct{}
	// stopRun stops the unit's Run only.
	stopRun context.CancelFunc
	runDone chan struct{}
	// ended is set once the campaign's elector returned; a late
	// OnStartedLeading must then not start the unit.
	ended bool
}

// New returns a Coordinator.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" || cfg.Identity == "" {
		return nil, errors.New("sharded: client, namespace, name and identity are required")
	}
	if cfg.RenewDeadline >= cfg.LeaseDuration || cfg.RetryPeriod <= 0 {
		return nil, fmt.Errorf("sharded: need 0 < retry period and renew deadline (%s) < lease duration (%s)", cfg.RenewDeadline, cfg.LeaseDuration)
	}
	if cfg.Policy == (Policy{}) {
		cfg.Policy = Policy{OrphanGrace: 2 * cfg.RetryPeriod, MinHold: cfg.LeaseDuration, Margin: 0.15}
	}
	c := &Coordinator{cfg: cfg, clock: clock.RealClock{}, units: map[string]*unitRun{}, firstSeen: map[string]time.Time{}}
	c.tracker = newTracker(c.clock)
	for _, u := range cfg.Units {
		if _, dup := c.units[u.Name]; dup {
			return nil, fmt.Errorf("sharded: unit %q listed twice", u.Name)
		}
		ur := &unitRun{unit: u, lease: UnitLeaseName(cfg.Name, u.Name), watchdog: leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)}
		c.units[u.Name] = ur
		// Publishes leader_election_master_status{name=<lease>} = 0 at once.
		if _, err := c.newElector(ur.lease, cfg.Identity, leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {},
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// HealthCheckers returns one check per unit, failing while this replica
// believes it leads the unit but has not renewed its Lease in time.
func (c *Coordinator) HealthCheckers() []healthz.HealthChecker {
	var out []healthz.HealthChecker
	for _, name := range c.unitNames() {
		ur := c.units[name]
		out = append(out, healthz.NamedCheck("leader-election-"+name, func(r *http.Request) error { return ur.watchdog.Check(r) }))
	}
	return out
}

// Leading lists the units this replica runs now.
func (c *Coordinator) Leading() []string {
	var out []string
	for _, name := range c.unitNames() {
		ur := c.units[name]
		ur.mu.Lock()
		if ur.state == leading {
			out = append(out, name)
		}
		ur.mu.Unlock()
	}
	return out
}

// Holders maps each unit to the identity holding its Lease as this
// replica sees it ("" while free).
func (c *Coordinator) Holders() map[string]string {
	out := make(map[string]string, len(c.units))
	for name, ur := range c.units {
		ur.mu.Lock()
		mine := ur.state == leading
		ur.mu.Unlock()
		if mine {
			out[name] = c.cfg.Identity
			continue
		}
		out[name], _ = c.tracker.state(ur.lease)
	}
	return out
}

func (c *Coordinator) unitNames() []string {
	names := make([]string, 0, len(c.units))
	for n := range c.units {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *Coordinator) newElector(lease, identity string, cb leaderelection.LeaderCallbacks) (*leaderelection.LeaderElector, error) {
	lock := &observingLock{
		LeaseLock: &rl.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.cfg.Namespace, Name: lease},
			Client:     c.cfg.Client.CoordinationV1(),
			LockConfig: rl.ResourceLockConfig{Identity: identity, EventRecorder: c.cfg.EventRecorder},
		},
		tracker: c.tracker,
	}
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: c.cfg.LeaseDuration,
		RenewDeadline: c.cfg.RenewDeadline,
		RetryPeriod:   c.cfg.RetryPeriod,
		// Released by hand once the unit has stopped: client-go would
		// release before the callback's work has ended.
		ReleaseOnCancel: false,
		Name:            lease,
		Callbacks:       cb,
	})
}

// Run coordinates until ctx ends, then stops every unit, releases its
// Leases and returns. It returns an error if a unit did not stop in time.
func (c *Coordinator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("sharded")
	ctx = klog.NewContext(ctx, logger)

	// Watches only the namespace's Leases; this is how replicas see each
	// other and the Leases they hold.
	factory := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace))
	inf := factory.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(c.tracker.handlers()); err != nil {
		return err
	}
	// Not ctx: the Leases are watched until every unit has stopped.
	infCtx, stopInformer := context.WithCancel(context.Background())
	factory.Start(infCtx.Done())
	defer func() {
		stopInformer()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	c.tracker.synced()
	c.started = c.clock.Now()

	// Membership: a Lease of our own, held as long as the process runs.
	memberCtx, stopMember := context.WithCancel(klog.NewContext(context.Background(), logger))
	memberDone := make(chan struct{})
	memberLease := MemberLeaseName(c.cfg.Name, c.cfg.Identity)
	go func() {
		defer close(memberDone)
		c.campaignForever(memberCtx, memberLease, c.cfg.Identity, nil)
	}()

	// The main Lease, renewed under the group identity.
	groupCtx, stopGroup := context.WithCancel(klog.NewContext(context.Background(), logger))
	groupDone := make(chan struct{})
	go func() {
		defer close(groupDone)
		c.campaignForever(groupCtx, c.cfg.Name, GroupIdentity(c.cfg.Name), func(gate context.Context) {
			c.mu.Lock()
			c.gate = gate
			c.mu.Unlock()
			c.tracker.notify()
		})
	}()

	logger.Info("Sharing controllers with other replicas", "identity", c.cfg.Identity, "memberLease", memberLease, "units", len(c.units))
	ticker := time.NewTicker(c.cfg.RetryPeriod)
	defer ticker.Stop()
	for ctx.Err() == nil {
		c.reconcile(ctx)
		select {
		case <-ctx.Done():
		case <-ticker.C:
		case <-c.tracker.changed:
		}
	}

	logger.Info("Stopping every controller and releasing their leases")
	err := c.stopAll(logger)
	// The main Lease is left to expire: another replica of ours may still
	// be renewing it, and clearing it would let an upstream replica start
	// beside that one.
	stopGroup()
	<-groupDone
	stopMember()
	<-memberDone
	c.release(logger, memberLease, c.cfg.Identity)
	return err
}

// campaignForever campaigns for a Lease and, once it holds it, calls
// onLead with a context that ends when the Lease is lost; then it campaigns
// again, until ctx ends.
func (c *Coordinator) campaignForever(ctx context.Context, lease, identity string, onLead func(context.Context)) {
	for ctx.Err() == nil {
		le, err := c.newElector(lease, identity, leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				if onLead != nil {
					onLead(lctx)
				}
			},
			OnStoppedLeading: func() {},
		})
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot create leader elector", "lease", lease)
			return
		}
		le.Run(ctx)
		if ctx.Err() == nil {
			klog.FromContext(ctx).Info("Lost lease, campaigning again", "lease", lease)
		}
	}
}

func (c *Coordinator) gateOpen() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate == nil || c.gate.Err() != nil {
		return nil
	}
	return c.gate
}

// members returns the live replicas that count for the assignment: ones
// present when this one started, and others once they have been live for
// a lease duration (so replicas that come and go move nothing).
func (c *Coordinator) members() []string {
	now := c.clock.Now()
	live := map[string]bool{c.cfg.Identity: true}
	for _, h := range c.tracker.holders(memberPrefix(c.cfg.Name)) {
		live[h] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range live {
		first, ok := c.firstSeen[id]
		if !ok {
			first = now
			c.firstSeen[id] = now
		}
		if id == c.cfg.Identity || first.Sub(c.started) < c.cfg.RetryPeriod || now.Sub(first) >= c.cfg.LeaseDuration {
			out = append(out, id)
		}
	}
	for id := range c.firstSeen {
		if !live[id] {
			delete(c.firstSeen, id)
		}
	}
	sort.Strings(out)
	return out
}

func (c *Coordinator) reconcile(ctx context.Context) {
	gate := c.gateOpen()
	if gate == nil {
		// Not renewing the main Lease (someone else's, or lost): nothing may run.
		for _, ur := range c.units {
			c.stopUnit(ctx, ur, false)
		}
		return
	}
	view := View{Self: c.cfg.Identity, Members: c.members(), States: map[string]UnitState{}, Now: c.clock.Now()}
	for _, name := range c.unitNames() {
		ur := c.units[name]
		view.Units = append(view.Units, WeightedUnit{Name: name, Weight: ur.unit.Weight})
		ur.mu.Lock()
		state, since := ur.state, ur.heldSince
		ur.mu.Unlock()
		holder, free := c.tracker.state(ur.lease)
		switch state {
		case leading:
			view.States[name] = UnitState{Holder: c.cfg.Identity, HeldSince: since}
		case campaigning, releasing:
			// Busy: neither acquire nor release it again this round.
			view.States[name] = UnitState{Holder: "busy"}
			if state == campaigning && holder != "" && holder != c.cfg.Identity {
				// Someone else won the race.
				c.stopUnit(ctx, ur, false)
			}
		default:
			if holder == c.cfg.Identity {
				// Released a moment ago and the informer has not seen it yet.
				holder = "busy"
			}
			view.States[name] = UnitState{Holder: holder, FreeSince: free}
		}
	}
	d := Decide(view, c.cfg.Policy)
	for _, name := range d.Acquire {
		c.campaign(ctx, gate, c.units[name])
	}
	for _, name := range d.Release {
		klog.FromContext(ctx).Info("Handing a controller over to another replica", "controller", name)
		c.stopUnit(ctx, c.units[name], false)
	}
}

// campaign starts an elector for the unit; the unit runs while it leads
// and the gate is open.
func (c *Coordinator) campaign(ctx context.Context, gate context.Context, ur *unitRun) {
	ur.mu.Lock()
	defer ur.mu.Unlock()
	if ur.state != idle {
		return
	}
	logger := klog.FromContext(ctx).WithValues("controller", ur.unit.Name)
	ectx, stop := context.WithCancel(klog.NewContext(context.Background(), logger))
	ur.state, ur.stop, ur.done, ur.ended = campaigning, stop, make(chan struct{}), false
	done := ur.done
	le, err := c.newElector(ur.lease, c.cfg.Identity, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leadCtx context.Context) {
			runCtx, stopRun := context.WithCancel(leadCtx)
			runDone := make(chan struct{})
			ur.mu.Lock()
			if ur.ended || ur.state != campaigning {
				ur.mu.Unlock()
				stopRun()
				return
			}
			ur.state, ur.heldSince, ur.stopRun, ur.runDone = leading, c.clock.Now(), stopRun, runDone
			ur.mu.Unlock()
			// Closing the gate stops the unit too.
			stopOnGate := context.AfterFunc(gate, stopRun)
			logger.Info("Acquired controller lease, starting controller", "lease", ur.lease)
			go func() {
				defer close(runDone)
				defer stopOnGate()
				ur.unit.Run(runCtx)
			}()
		},
		OnStoppedLeading: func() {},
	})
	if err != nil {
		logger.Error(err, "Cannot create leader elector")
		ur.state = idle
		stop()
		close(done)
		return
	}
	ur.watchdog.SetLeaderElection(le)
	go func() {
		le.Run(ectx)
		// The campaign ended: asked to, or the Lease could not be renewed
		// (then Run's context is already cancelled). Wait for the unit to
		// stop before anyone can be told the Lease is free.
		ur.mu.Lock()
		ur.ended = true
		stopRun, runDone := ur.stopRun, ur.runDone
		ur.mu.Unlock()
		if stopRun != nil {
			stopRun()
			<-runDone
			logger.Info("Controller stopped", "lease", ur.lease)
		}
		if stopRun != nil || le.IsLeader() {
			c.release(logger, ur.lease, c.cfg.Identity)
			// A fresh elector publishes leader_election_master_status 0.
			_, _ = c.newElector(ur.lease, c.cfg.Identity, leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}})
		}
		ur.mu.Lock()
		ur.state, ur.stop, ur.stopRun, ur.runDone = idle, nil, nil, nil
		ur.mu.Unlock()
		close(done)
		c.tracker.notify()
	}()
}

// stopUnit stops a unit's campaign or its run. The unit's Lease stays
// renewed until the unit's Run has returned; with wait, it waits up to
// StopTimeout for that and reports whether it happened.
func (c *Coordinator) stopUnit(_ context.Context, ur *unitRun, wait bool) bool {
	ur.mu.Lock()
	if ur.state == idle {
		ur.mu.Unlock()
		return true
	}
	state := ur.state
	if state == leading {
		ur.state = releasing
	}
	stopRun, runDone, stop, done := ur.stopRun, ur.runDone, ur.stop, ur.done
	ur.mu.Unlock()

	switch state {
	case campaigning:
		stop()
	case leading:
		stopRun()
		// The Lease is renewed until the unit has returned.
		go func() {
			<-runDone
			stop()
		}()
	}
	if !wait {
		return true
	}
	var timeout <-chan time.Time
	if c.cfg.StopTimeout > 0 {
		timeout = c.clock.After(c.cfg.StopTimeout)
	}
	select {
	case <-done:
		return true
	case <-timeout:
		return false
	}
}

func (c *Coordinator) stopAll(logger klog.Logger) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		stuck []string
	)
	for _, name := range c.unitNames() {
		ur := c.units[name]
		wg.Go(func() {
			if !c.stopUnit(context.Background(), ur, true) {
				mu.Lock()
				stuck = append(stuck, name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(stuck) > 0 {
		sort.Strings(stuck)
		logger.Info("Controller shutdown timeout reached", "timeout", c.cfg.StopTimeout, "runningControllers", stuck)
		return errors.New("controller shutdown timeout reached")
	}
	return nil
}

// release gives a Lease up if identity still holds it, as client-go's
// elector does on cancel, but only after the work it guarded has ended.
func (c *Coordinator) release(logger klog.Logger, lease, identity string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewDeadline)
	defer cancel()
	leases := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
	for ctx.Err() == nil {
		l, err := leases.Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				logger.Error(err, "Cannot release lease", "lease", lease)
			}
			return
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != identity {
			return
		}
		now := metav1.NewMicroTime(c.clock.Now())
		l.Spec = coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(""),
			LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     l.Spec.LeaseTransitions,
		}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			logger.V(2).Info("Released lease", "lease", lease)
			return
		} else if !apierrors.IsConflict(err) {
			logger.Error(err, "Cannot release lease", "lease", lease)
			return
		}
	}
}
