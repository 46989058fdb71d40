package statefulset

import (
	"context"
	"fmt"
	"strings"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// objectStore is where the StatefulSet logic reads (from caches) and
// writes (through the API) pods and claims. Unit tests swap in a store
// backed by informer indexers only.
type objectStore interface {
	CreatePod(ctx context.Context, pod *v1.Pod, set *apps.StatefulSet) error
	GetPod(namespace, name string) (*v1.Pod, error)
	UpdatePod(ctx context.Context, pod *v1.Pod, set *apps.StatefulSet) error
	DeletePod(ctx context.Context, pod *v1.Pod) error
	CreateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, set *apps.StatefulSet) error
	GetClaim(namespace, name string) (*v1.PersistentVolumeClaim, error)
	UpdateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, set *apps.StatefulSet) error
}

// apiStore is the production objectStore. Every successful write is
// recorded in the consistency store so the next sync of the set waits for
// the informers to show it.
type apiStore struct {
	client      clientset.Interface
	podLister   corelisters.PodLister
	claimLister corelisters.PersistentVolumeClaimLister
	consistency controller.ConsistencyStore
}

func (s *apiStore) wrote(set *apps.StatefulSet, resource schema.GroupResource, rv string) {
	s.consistency.WroteAt(types.NamespacedName{Namespace: set.Namespace, Name: set.Name}, set.UID, resource, rv)
}

func (s *apiStore) CreatePod(ctx context.Context, pod *v1.Pod, set *apps.StatefulSet) error {
	created, err := s.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		s.wrote(set, podsResource, created.ResourceVersion)
	}
	return err
}

func (s *apiStore) GetPod(namespace, name string) (*v1.Pod, error) {
	return s.podLister.Pods(namespace).Get(name)
}

// UpdatePod writes pod's metadata (and claim volumes) over a live read of
// the pod: cached pods lack the spec fields no controller reads
// (controller.TrimPodForCache), and an update must carry all of them. The
// write keeps pod's resourceVersion, so a pod changed since it was cached
// is a conflict, as with a plain update.
func (s *apiStore) UpdatePod(ctx context.Context, pod *v1.Pod, set *apps.StatefulSet) error {
	live, err := s.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if live.UID != pod.UID {
		return apierrors.NewConflict(podsResource, pod.Name, fmt.Errorf("pod was replaced (uid %s, cached %s)", live.UID, pod.UID))
	}
	live.ObjectMeta = pod.ObjectMeta
	if !storageMatches(set, live) {
		updateStorage(set, live)
	}
	updated, err := s.client.CoreV1().Pods(pod.Namespace).Update(ctx, live, metav1.UpdateOptions{})
	if err == nil {
		s.wrote(set, podsResource, updated.ResourceVersion)
	}
	return err
}

func (s *apiStore) DeletePod(ctx context.Context, pod *v1.Pod) error {
	return s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
}

func (s *apiStore) CreateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, set *apps.StatefulSet) error {
	created, err := s.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err == nil {
		s.wrote(set, claimsResource, created.ResourceVersion)
	}
	return err
}

func (s *apiStore) GetClaim(namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return s.claimLister.PersistentVolumeClaims(namespace).Get(name)
}

// UpdateClaim uses update, not patch: the controller's RBAC role may only
// update claims.
func (s *apiStore) UpdateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, set *apps.StatefulSet) error {
	updated, err := s.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	if err == nil {
		s.wrote(set, claimsResource, updated.ResourceVersion)
	}
	return err
}

// podControl creates, updates and deletes a set's pods and claims, and
// records the events upstream records for each.
type podControl struct {
	store    objectStore
	recorder record.EventRecorder
}

// Event verbs; the reason is "Successful<Verb>" or "Failed<Verb>".
const (
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

func titled(verb string) string {
	return strings.ToUpper(verb[:1]) + verb[1:]
}

func (pc *podControl) podEvent(verb string, set *apps.StatefulSet, pod *v1.Pod, err error) {
	if err == nil {
		pc.recorder.Event(set, v1.EventTypeNormal, "Successful"+titled(verb),
			fmt.Sprintf("%s Pod %s in StatefulSet %s successful", titled(verb), pod.Name, set.Name))
		return
	}
	pc.recorder.Event(set, v1.EventTypeWarning, "Failed"+titled(verb),
		fmt.Sprintf("%s Pod %s in StatefulSet %s failed error: %s", titled(verb), pod.Name, set.Name, err))
}

func (pc *podControl) claimEvent(verb string, set *apps.StatefulSet, pod *v1.Pod, claim *v1.PersistentVolumeClaim, err error) {
	if err == nil {
		pc.recorder.Event(set, v1.EventTypeNormal, "Successful"+titled(verb),
			fmt.Sprintf("%s Claim %s Pod %s in StatefulSet %s success", titled(verb), claim.Name, pod.Name, set.Name))
		return
	}
	pc.recorder.Event(set, v1.EventTypeWarning, "Failed"+titled(verb),
		fmt.Sprintf("%s Claim %s for Pod %s in StatefulSet %s failed error: %s", titled(verb), claim.Name, pod.Name, set.Name, err))
}

// createPod creates pod's missing claims, then pod, then brings the claims'
// owner references in line with the retention policy.
func (pc *podControl) createPod(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	if err := pc.createClaims(ctx, set, pod); err != nil {
		pc.podEvent(verbCreate, set, pod, err)
		return err
	}
	err := pc.store.CreatePod(ctx, pod, set)
	if apierrors.IsAlreadyExists(err) {
		// Our cache is behind; the next sync will see the pod.
		return err
	}
	if claimErr := pc.fixClaimOwners(ctx, set, pod); claimErr != nil {
		pc.podEvent(verbUpdate, set, pod, claimErr)
		return claimErr
	}
	pc.podEvent(verbCreate, set, pod, err)
	return err
}

// updatePod fixes pod's identity, storage and claim ownership, writing the
// pod only if its identity or storage changed (or its claims did). pod
// must be a private copy.
func (pc *podControl) updatePod(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	attempted := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		dirty := false
		if !identityMatches(set, pod) {
			updateIdentity(set, pod)
			dirty = true
		}
		if !storageMatches(set, pod) {
			updateStorage(set, pod)
			dirty = true
			if err := pc.createClaims(ctx, set, pod); err != nil {
				pc.podEvent(verbUpdate, set, pod, err)
				return err
			}
		}
		match, err := pc.claimsMatchPolicy(ctx, set, pod)
		if err != nil {
			pc.podEvent(verbUpdate, set, pod, err)
			return err
		}
		if !match {
			if err := pc.fixClaimOwners(ctx, set, pod); err != nil {
				pc.podEvent(verbUpdate, set, pod, err)
				return err
			}
			dirty = true
		}
		if !dirty {
			return nil
		}
		attempted = true
		updateErr := pc.store.UpdatePod(ctx, pod, set)
		if updateErr == nil {
			return nil
		}
		if fresh, err := pc.store.GetPod(set.Namespace, pod.Name); err == nil {
			pod = fresh.DeepCopy()
		} else {
			klog.FromContext(ctx).Error(err, "Error getting updated Pod from lister", "pod", klog.KRef(set.Namespace, pod.Name))
		}
		return updateErr
	})
	if attempted {
		pc.podEvent(verbUpdate, set, pod, err)
	}
	return err
}

// deletePod deletes pod; one already gone counts as deleted.
func (pc *podControl) deletePod(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	if err := pc.store.DeletePod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		pc.podEvent(verbDelete, set, pod, err)
		return err
	}
	pc.podEvent(verbDelete, set, pod, nil)
	return nil
}

// claimsMatchPolicy reports whether pod's existing claims carry the owner
// references the retention policy asks for. Missing claims are skipped: a
// later sync handles them.
func (pc *podControl) claimsMatchPolicy(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) (bool, error) {
	ord := getOrdinal(pod)
	for i := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim, err := pc.store.GetClaim(set.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			klog.FromContext(ctx).V(4).Info("Expected claim missing, continuing to pick up in next iteration", "PVC", klog.KRef(set.Namespace, name))
		case err != nil:
			return false, fmt.Errorf("could not retrieve claim %s for %s when checking PVC deletion policy: %w", name, pod.Name, err)
		case !claimOwnerUpToDate(claim, set, pod):
			return false, nil
		}
	}
	return true, nil
}

// fixClaimOwners updates each existing claim of pod whose owner references
// disagree with the retention policy.
func (pc *podControl) fixClaimOwners(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	ord := getOrdinal(pod)
	for i := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim, err := pc.store.GetClaim(set.Namespace, name)
		if apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(4).Info("Expected claim missing, continuing to pick up in next iteration", "PVC", klog.KRef(set.Namespace, name))
			continue
		}
		if err != nil {
			return fmt.Errorf("could not retrieve claim %s for %s when checking PVC deletion policy: %w", name, pod.Name, err)
		}
		if hasUnexpectedController(claim, set, pod) {
			pc.recorder.Event(set, v1.EventTypeWarning, "ConflictingController",
				fmt.Sprintf("PersistentVolumeClaim %s has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim", name))
		}
		if claimOwnerUpToDate(claim, set, pod) {
			continue
		}
		claim = claim.DeepCopy()
		setClaimOwners(claim, set, pod)
		if err := pc.store.UpdateClaim(ctx, claim, set); err != nil {
			return fmt.Errorf("could not update claim %s for delete policy ownerRefs: %w", name, err)
		}
	}
	return nil
}

// claimIsStale reports whether a claim of pod still belongs to an earlier
// pod of the same name (whenScaled=Delete only): creating the pod must
// wait until the garbage collector has removed it.
func (pc *podControl) claimIsStale(set *apps.StatefulSet, pod *v1.Pod) (bool, error) {
	if retentionPolicy(set).WhenScaled == retainPolicy {
		return false, nil
	}
	for _, want := range claimsFor(set, pod) {
		claim, err := pc.store.GetClaim(want.Namespace, want.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		case hasStaleOwnerRef(claim, pod, podKind):
			return true, nil
		}
	}
	return false, nil
}

// createClaims creates the claims pod lacks. A claim being deleted is an
// error: the pod must not start on storage about to disappear.
//
// New claims are created without owner references, as upstream creates
// them; the retention policy's references are added once the claim is in
// the cache (right after the pod is created, or on a later sync through
// updatePod, with its pod update and event).
func (pc *podControl) createClaims(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	var errs []error
	claims := claimsFor(set, pod)
	for i := range claims {
		claim := &claims[i]
		existing, err := pc.store.GetClaim(claim.Namespace, claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			err := pc.store.CreateClaim(ctx, claim, set)
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			}
			if !apierrors.IsAlreadyExists(err) {
				pc.claimEvent(verbCreate, set, pod, claim, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
			pc.claimEvent(verbCreate, set, pod, claim, err)
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// createMissingClaims is run for pending pods: a claim deleted after its
// pod was created is recreated so the pod can start.
func (pc *podControl) createMissingClaims(ctx context.Context, set *apps.StatefulSet, pod *v1.Pod) error {
	if err := pc.createClaims(ctx, set, pod); err != nil {
		return err
	}
	if err := pc.fixClaimOwners(ctx, set, pod); err != nil {
		pc.podEvent(verbUpdate, set, pod, err)
		return err
	}
	return nil
}
