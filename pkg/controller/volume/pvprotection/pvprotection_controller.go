// Package pvprotection implements the persistentvolume-protection-controller.
// The kubernetes.io/pv-protection finalizer keeps a PersistentVolume that
// is bound to a claim from disappearing under it: this controller removes
// the finalizer from a PV being deleted once the PV is no longer bound, and
// adds it to PVs that lack it (the StorageObjectInUseProtection admission
// plugin normally adds it at creation; this covers older PVs).
package pvprotection

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/protectionutil"
)

const (
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "pvprotection"
	// Finalizer is the finalizer this controller manages.
	Finalizer = "kubernetes.io/pv-protection"
)

// Controller manages the PV protection finalizer. Its queue holds PV names.
type Controller struct {
	client clientset.Interface

	pvLister corelisters.PersistentVolumeLister
	pvSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to the PV informer.
func NewController(logger klog.Logger, pvInformer coreinformers.PersistentVolumeInformer, cl clientset.Interface) *Controller {
	c := &Controller{
		client:   cl,
		pvLister: pvInformer.Lister(),
		pvSynced: pvInformer.Informer().HasSynced,
		queue:    controller.NewNamedQueue(queueName),
	}
	c.loop = controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncPV}
	// Deleted PVs need nothing: the finalizer is what held them.
	if _, err := pvInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.pvAddedUpdated(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.pvAddedUpdated(logger, cur) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		// Only a stopped informer refuses handlers; the controller would
		// then never run anyway.
		utilruntime.HandleErrorWithLogger(logger, err, "Could not add PV event handler")
	}
	return c
}

// Run waits for the PV cache and syncs PVs with workers goroutines until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.pvSynced)
}

// pvAddedUpdated queues only PVs the sync would write: one lacking the
// finalizer, or one being deleted that still has it.
func (c *Controller) pvAddedUpdated(logger klog.Logger, obj interface{}) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "PV informer returned non-PV object", "type", fmt.Sprintf("%T", obj))
		return
	}
	logger.V(4).Info("Got event on PV", "PV", klog.KObj(pv))
	if protectionutil.NeedsWrite(pv, Finalizer) {
		c.queue.Add(pv.Name)
	}
}

// isBeingUsed trusts the phase the PV controller writes: only a Bound PV is
// in use. A PV still naming a claim but Released may go.
func isBeingUsed(pv *v1.PersistentVolume) bool {
	return pv.Status.Phase == v1.VolumeBound
}

func (c *Controller) syncPV(ctx context.Context, name string) error {
	return c.finalizer().SyncClusterScoped(ctx, name, c.pvLister.Get, isBeingUsed)
}

// finalizer writes this controller's finalizer through the client.
func (c *Controller) finalizer() protectionutil.Finalizer[*v1.PersistentVolume] {
	return protectionutil.Finalizer[*v1.PersistentVolume]{
		Name: Finalizer,
		Kind: "PV",
		Update: func(ctx context.Context, obj *v1.PersistentVolume, opts metav1.UpdateOptions) (*v1.PersistentVolume, error) {
			return c.client.CoreV1().PersistentVolumes().Update(ctx, obj, opts)
		},
	}
}
