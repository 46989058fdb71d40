package storageversionmigrator

import (
	"context"
	"fmt"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	svminformers "k8s.io/client-go/informers/storagemigration/v1"
	clientset "k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// MigrationRunnerControllerName names the loop and is the field
	// manager of its writes to CRD status.
	MigrationRunnerControllerName = "migration-runner-controller"
	// crdStorageMigrating is the CRD condition set while a migration of
	// its objects runs.
	crdStorageMigrating = "StorageMigrating"
)

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// MigrationRunnerController lets one migration per resource run at a time.
// Pending migrations of a resource are started (Running=True) oldest first,
// once none is running; a finished one gets Running=False. For a custom
// resource it also marks the CRD StorageMigrating while a migration runs
// and, after a successful one, leaves only the storage version in the
// CRD's status.storedVersions.
type MigrationRunnerController struct {
	kubeClient clientset.Interface
	crdClient  dynamic.ResourceInterface
	svmLister  svmlisters.StorageVersionMigrationLister
	svmSynced  cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[metav1.GroupResource]
	loop       controller.WorkLoop[metav1.GroupResource]
}

// NewCustomResourceController builds the migration runner; CRDs are read
// and their status applied through dynamicClient.
func NewCustomResourceController(
	ctx context.Context,
	kubeClient clientset.Interface,
	svmInformer svminformers.StorageVersionMigrationInformer,
	dynamicClient dynamic.Interface,
) *MigrationRunnerController {
	logger := klog.FromContext(ctx)
	c := &MigrationRunnerController{
		kubeClient: kubeClient,
		crdClient:  dynamicClient.Resource(CRDResource),
		svmLister:  svmInformer.Lister(),
		svmSynced:  svmInformer.Informer().HasSynced,
		// Upstream names this queue like the resource version
		// controller's, so their workqueue metrics add up; kept for the
		// same series.
		queue: controller.NewNamedTypedQueue[metav1.GroupResource](ResourceVersionControllerName),
	}
	c.loop = controller.WorkLoop[metav1.GroupResource]{Name: MigrationRunnerControllerName, Queue: c.queue, Sync: c.sync}

	// Keyed by resource: any change to a migration may let the next one
	// of its resource start.
	enqueue := func(what string, obj interface{}) {
		obj = controller.Untombstone(obj)
		svm, ok := obj.(*svmv1.StorageVersionMigration)
		if !ok {
			logger.Info("could not cast to SVM", "object", obj)
			return
		}
		logger.V(4).Info(what, "svm", klog.KObj(svm))
		c.queue.Add(svm.Spec.Resource)
	}
	_, err := svmInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueue("Adding", obj) },
		UpdateFunc: func(_, obj interface{}) { enqueue("Updating", obj) },
		DeleteFunc: func(obj interface{}) { enqueue("Deleting", obj) },
	}, cache.HandlerOptions{Logger: &logger})
	utilruntime.Must(err)
	return c
}

// Run waits for the informer and runs one worker until ctx is done.
func (c *MigrationRunnerController) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, 1, c.svmSynced)
}

func (c *MigrationRunnerController) sync(ctx context.Context, resource metav1.GroupResource) error {
	finished, next, err := c.migrationsFor(resource)
	if err != nil {
		return err
	}
	for _, svm := range finished {
		if err := c.finish(ctx, svm); err != nil {
			return err
		}
	}
	if next != nil {
		return c.start(ctx, next)
	}
	return nil
}

// migrationsFor returns the migrations of resource that finished but are
// still Running, and the one to start: the oldest (then first by name)
// that has not run, provided none is running.
func (c *MigrationRunnerController) migrationsFor(resource metav1.GroupResource) (finished []*svmv1.StorageVersionMigration, next *svmv1.StorageVersionMigration, err error) {
	all, err := c.svmLister.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	busy := false
	for _, svm := range all {
		if svm.Spec.Resource != resource {
			continue
		}
		running, terminal := isRunning(svm), isTerminal(svm)
		switch {
		case running && terminal:
			finished = append(finished, svm.DeepCopy())
		case running:
			busy = true
			next = nil
		case !terminal && !busy && (next == nil || olderSVM(svm, next)):
			next = svm
		}
	}
	if next != nil {
		next = next.DeepCopy()
	}
	return finished, next, nil
}

func olderSVM(a, b *svmv1.StorageVersionMigration) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return strings.Compare(a.Name, b.Name) < 0
}

// finish sets Running=False on a migration that succeeded or failed, after
// closing the CRD's StorageMigrating condition.
func (c *MigrationRunnerController) finish(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	if !isRunning(svm) {
		return nil
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{
		Type:               string(svmv1.MigrationRunning),
		Status:             metav1.ConditionFalse,
		Reason:             migrationCompletedReason,
		Message:            migrationCompletedMessage,
		ObservedGeneration: svm.Generation,
	})
	if err := c.finishCRD(ctx, svm); err != nil {
		return err
	}
	_, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// start marks the resource's CRD StorageMigrating (if it is a custom
// resource) and the migration Running.
func (c *MigrationRunnerController) start(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	crd, exists, err := c.crdFor(ctx, svm.Spec.Resource)
	if err != nil {
		return err
	}
	if exists {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current, err := c.crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			apply := crdStatusApply(current, crdCondition{
				status:  "True",
				reason:  "MigrationRunning",
				message: fmt.Sprintf("Migration %s is running", svm.Name),
			}, "")
			_, err = c.crdClient.ApplyStatus(ctx, current.GetName(), apply,
				metav1.ApplyOptions{FieldManager: MigrationRunnerControllerName, Force: true})
			return err
		})
		if err != nil {
			return err
		}
	}
	svm = addConditionOnce(svm, svmv1.MigrationRunning, migrationRunningReason, runningMessage(nil, nil))
	_, err = c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// finishCRD sets the CRD's StorageMigrating to False. After a success, and
// if the CRD did not change since the migration started (the condition's
// observedGeneration still matches), only the current storage version is
// left in status.storedVersions: no object is stored in another one now.
func (c *MigrationRunnerController) finishCRD(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	crd, exists, err := c.crdFor(ctx, svm.Spec.Resource)
	if err != nil || !exists {
		return err
	}
	succeeded := meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded))
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := c.crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		gen, found := migratingObservedGeneration(current)
		canTrim := found && gen == current.GetGeneration()

		cond := crdCondition{status: "False", reason: "MigrationFailed", message: "The migration has failed"}
		if succeeded {
			cond.reason = "MigrationSucceeded"
			if canTrim {
				cond.message = "The migration has succeeded and the stored versions have been updated"
			} else {
				cond.message = "The migration has succeeded but the stored versions have not been updated due to a generation mismatch"
			}
		}
		storedVersion := ""
		if canTrim {
			// Trimmed whether or not the migration succeeded, as upstream.
			storedVersion = storageVersion(current)
		}
		apply := crdStatusApply(current, cond, storedVersion)
		_, err = c.crdClient.ApplyStatus(ctx, current.GetName(), apply,
			metav1.ApplyOptions{FieldManager: MigrationRunnerControllerName, Force: true})
		return err
	})
}

// crdFor returns the CRD defining gr, named <resource>.<group>.
func (c *MigrationRunnerController) crdFor(ctx context.Context, gr metav1.GroupResource) (*unstructured.Unstructured, bool, error) {
	crd, err := c.crdClient.Get(ctx, fmt.Sprintf("%s.%s", gr.Resource, gr.Group), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return crd, true, nil
}

type crdCondition struct {
	status, reason, message string
}

// crdStatusApply is the server-side apply body for a CRD's status: the
// StorageMigrating condition observed at crd's generation and, when
// storedVersion is set, storedVersions reduced to it. It carries crd's
// resourceVersion so that a CRD changed since it was read is not written.
func crdStatusApply(crd *unstructured.Unstructured, cond crdCondition, storedVersion string) *unstructured.Unstructured {
	status := map[string]interface{}{
		"conditions": []interface{}{map[string]interface{}{
			"type":               crdStorageMigrating,
			"status":             cond.status,
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
			"reason":             cond.reason,
			"message":            cond.message,
			"observedGeneration": crd.GetGeneration(),
		}},
	}
	if storedVersion != "" {
		status["storedVersions"] = []interface{}{storedVersion}
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": CRDResource.GroupVersion().String(),
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]interface{}{
			"name":            crd.GetName(),
			"resourceVersion": crd.GetResourceVersion(),
		},
		"status": status,
	}}
}

// migratingObservedGeneration is the observedGeneration of crd's
// StorageMigrating condition, if it has one.
func migratingObservedGeneration(crd *unstructured.Unstructured) (int64, bool) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]interface{})
		if !ok || m["type"] != crdStorageMigrating {
			continue
		}
		switch g := m["observedGeneration"].(type) {
		case int64:
			return g, true
		case float64:
			return int64(g), true
		case int:
			return int64(g), true
		}
		// Present but without a generation: compares as 0.
		return 0, true
	}
	return 0, false
}

// storageVersion is the name of the version crd stores objects in.
func storageVersion(crd *unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]interface{})
		if !ok {
			continue
		}
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return name
		}
	}
	return ""
}
