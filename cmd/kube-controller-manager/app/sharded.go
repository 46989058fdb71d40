package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kcmclone/controller-manager/clientbuilder"
	"github.com/kcmclone/controller-manager/leaderelection/sharded"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
	kcmcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// controllerWeights is each controller's share of the work, relative to a
// light controller's 1: roughly how many objects it watches and how often
// it writes. Controllers not listed weigh defaultControllerWeight.
var controllerWeights = map[string]int{
	names.GarbageCollectorController:             10,
	names.ReplicaSetController:                   8,
	names.DeploymentController:                   6,
	names.EndpointSliceController:                6,
	names.ResourceQuotaController:                5,
	names.NodeLifecycleController:                4,
	names.DaemonSetController:                    4,
	names.StatefulSetController:                  4,
	names.JobController:                          4,
	names.EndpointsController:                    4,
	names.NamespaceController:                    3,
	names.DisruptionController:                   3,
	names.PersistentVolumeBinderController:       3,
	names.PersistentVolumeAttachDetachController: 3,
	names.TaintEvictionController:                3,
	names.PodGarbageCollectorController:          2,
	names.ReplicationControllerController:        2,
	names.EndpointSliceMirroringController:       2,
	names.ResourceClaimController:                2,
	names.HorizontalPodAutoscalerController:      2,
	names.CronJobController:                      2,
	names.TTLController:                          1,
	names.TTLAfterFinishedController:             1,
	names.ClusterRoleAggregationController:       1,
}

const defaultControllerWeight = 1

func controllerWeight(name string) int {
	if w, ok := controllerWeights[name]; ok {
		return w
	}
	return defaultControllerWeight
}

// shardedController is one controller under its own Lease. Its informers
// are shared and stay warm; the controller object itself is built again
// for each run after the first, since a stopped controller's queue is shut
// down for good.
type shardedController struct {
	d  *ControllerDescriptor
	cc ControllerContext
	// startInformers starts informers the build asked for (cold builds).
	startInformers func()
	logger         klog.Logger

	mu sync.Mutex
	// next is a built controller not yet run (the warm build), nextReg
	// the handlers it added.
	next    Controller
	nextReg *handlerRegistry
	// current is the running controller, for its health check.
	current Controller
}

// build builds the controller on the shared informers, recording the
// handlers it adds; mux, when given, gets its debug handlers.
func (s *shardedController) build(ctx context.Context, mux *mux.PathRecorderMux) (Controller, *handlerRegistry, error) {
	reg := &handlerRegistry{}
	ctrl, _, err := buildController(ctx, s.cc.tracked(reg), s.d, mux)
	if err != nil || ctrl == nil {
		reg.removeAll()
		return nil, nil, err
	}
	return ctrl, reg, nil
}

func (s *shardedController) run(ctx context.Context) {
	s.mu.Lock()
	ctrl, reg := s.next, s.nextReg
	s.next, s.nextReg = nil, nil
	s.mu.Unlock()
	if ctrl == nil {
		var err error
		if ctrl, reg, err = s.build(ctx, nil); err != nil || ctrl == nil {
			// Logged by build; the Lease is kept so no other replica loops
			// on the same failure, and given up at the next hand-over.
			<-ctx.Done()
			return
		}
		s.startInformers()
	}
	// This build is done with once it returns: the next run builds anew.
	defer reg.removeAll()
	if d := wait.Jitter(s.cc.ComponentConfig.Generic.ControllerStartInterval.Duration, controllerStartJitter); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return
		}
	}
	s.mu.Lock()
	s.current = ctrl
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.current = nil
		s.mu.Unlock()
	}()
	s.logger.V(1).Info("Controller starting...", "controller", s.d.Name())
	st := s.cc.Statuses.Controller(s.d.Name())
	st.Start(time.Now())
	defer st.Stop()
	ctrl.Run(kcmcontroller.WithStatus(ctx, st))
	s.logger.V(1).Info("Controller terminated", "controller", s.d.Name())
}

// check is the controller's /healthz/<name>: its own check while it runs
// here, ok otherwise.
func (s *shardedController) check(r *http.Request) error {
	s.mu.Lock()
	ctrl := s.current
	s.mu.Unlock()
	if ctrl == nil {
		return nil
	}
	if hc, ok := ctrl.(interface{ HealthChecker() healthz.HealthChecker }); ok {
		if real := hc.HealthChecker(); real != nil {
			return real.Check(r)
		}
	}
	return nil
}

// runSharded runs this replica's share of the controllers, each while it
// holds the controller's Lease, until ctx ends.
func runSharded(ctx context.Context, c *config.CompletedConfig, id string, unsecuredMux *mux.PathRecorderMux, health healthHandlers,
	informerSync *informerSyncCheck, page *controllersPage, rootClientBuilder, clientBuilder clientbuilder.ControllerClientBuilder) error {
	logger := klog.FromContext(ctx)
	// Informers outlive hand-overs: they stop only when the process does.
	cc, err := CreateControllerContext(ctx, c, rootClientBuilder, clientBuilder)
	if err != nil {
		return err
	}
	cc.Statuses = page.statuses
	descriptors := NewControllerDescriptors()
	warm := c.ShardedWarmStandby

	var (
		units  []sharded.Unit
		checks []healthz.HealthChecker
	)
	startInformers := func() { cc.StartInformers(ctx.Done()) }
	for _, d := range enabledControllers(ctx, cc, descriptors) {
		s := &shardedController{d: d, cc: cc, startInformers: startInformers, logger: logger}
		if warm {
			// Build now so its informers start with everyone's; this first
			// build also mounts the debug handlers.
			ctrl, reg, err := s.build(ctx, unsecuredMux)
			if err != nil {
				return err
			}
			if ctrl == nil {
				continue
			}
			s.next, s.nextReg = ctrl, reg
		}
		// Every controller gets a row, held here or not.
		cc.Statuses.Controller(d.Name())
		units = append(units, sharded.Unit{Name: d.Name(), Weight: controllerWeight(d.Name()), Run: s.run})
		checks = append(checks, healthz.NamedCheck(d.Name(), s.check))
	}
	cc.StartInformers(ctx.Done())
	defer cc.ShutdownInformers()
	close(cc.InformersStarted)
	informerSync.watch(ctx, cc)

	le := c.ComponentConfig.Generic.LeaderElection
	lockConfig := restclient.CopyConfig(c.Kubeconfig)
	// The lock's requests must fail faster than the renew deadline.
	lockConfig.Timeout = le.RenewDeadline.Duration
	lockClient, err := clientset.NewForConfig(restclient.AddUserAgent(lockConfig, "leader-election"))
	if err != nil {
		return fmt.Errorf("error creating lock client: %w", err)
	}
	coord, err := sharded.New(sharded.Config{
		Client:        lockClient,
		Namespace:     le.ResourceNamespace,
		Name:          le.ResourceName,
		Identity:      id,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		EventRecorder: c.EventRecorder,
		Units:         units,
		StopTimeout:   c.ControllerShutdownTimeout,
	})
	if err != nil {
		return err
	}
	health.AddHealthChecker(append(checks, coord.HealthCheckers()...)...)
	page.setSharded(id, coord)
	if err := coord.Run(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.Canceled) {
		return context.Cause(ctx)
	}
	return nil
}
