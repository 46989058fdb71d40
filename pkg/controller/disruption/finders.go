package disruption

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	scaleclient "k8s.io/client-go/scale"
)

// controllerAndScale is a pod controller's identity and desired replicas.
type controllerAndScale struct {
	types.UID
	scale int32
}

// podControllerFinder resolves a pod's controller reference. It returns nil
// (and no error) when the reference is not of the kind it handles or the
// object is gone or is another incarnation.
type podControllerFinder func(ctx context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error)

// Groups under which each built-in workload kind is accepted in owner
// references.
var (
	rsGroups  = []string{"apps", "extensions"}
	depGroups = []string{"apps", "extensions"}
	ssGroups  = []string{"apps"}
	rcGroups  = []string{""}
)

// scaleVersions are the group/versions a Scale subresource may be served in
// for the scale client to understand it.
var scaleVersions = scaleclient.NewScaleConverter().ScaleVersions()

// finders lists the finders in the order they are tried. Built-in kinds are
// read from listers; only the rest goes to the scale subresource.
func (dc *Controller) finders() []podControllerFinder {
	return []podControllerFinder{
		dc.getPodReplicationController,
		dc.getPodDeployment,
		dc.getPodReplicaSet,
		dc.getPodStatefulSet,
		dc.getScaleController,
	}
}

// verifyGroupKind reports whether ref names kind in one of groups. A
// malformed apiVersion is an error.
func verifyGroupKind(ref *metav1.OwnerReference, kind string, groups []string) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, err
	}
	return ref.Kind == kind && slices.Contains(groups, gv.Group), nil
}

// replicasOrDefault reads spec.replicas, which the API server defaults to 1.
func replicasOrDefault(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// getPodReplicaSet handles ReplicaSets that no Deployment controls (those
// are counted through their Deployment by getPodDeployment).
func (dc *Controller) getPodReplicaSet(_ context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error) {
	if ok, err := verifyGroupKind(ref, "ReplicaSet", rsGroups); !ok || err != nil {
		return nil, err
	}
	rs, err := dc.rsLister.ReplicaSets(namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		// NotFound is the lister's only error: not ours to count.
		return nil, nil
	}
	if owner := metav1.GetControllerOfNoCopy(rs); owner != nil && owner.Kind == "Deployment" {
		return nil, nil
	}
	return &controllerAndScale{rs.UID, replicasOrDefault(rs.Spec.Replicas)}, nil
}

// getPodDeployment handles pods of a ReplicaSet controlled by a Deployment:
// the Deployment's replicas count, whichever of its ReplicaSets owns the pod.
func (dc *Controller) getPodDeployment(_ context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error) {
	if ok, err := verifyGroupKind(ref, "ReplicaSet", rsGroups); !ok || err != nil {
		return nil, err
	}
	rs, err := dc.rsLister.ReplicaSets(namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	depRef := metav1.GetControllerOfNoCopy(rs)
	if depRef == nil {
		return nil, nil
	}
	if ok, err := verifyGroupKind(depRef, "Deployment", depGroups); !ok || err != nil {
		return nil, err
	}
	d, err := dc.dLister.Deployments(rs.Namespace).Get(depRef.Name)
	if err != nil || d.UID != depRef.UID {
		return nil, nil
	}
	return &controllerAndScale{d.UID, replicasOrDefault(d.Spec.Replicas)}, nil
}

func (dc *Controller) getPodReplicationController(_ context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error) {
	if ok, err := verifyGroupKind(ref, "ReplicationController", rcGroups); !ok || err != nil {
		return nil, err
	}
	rc, err := dc.rcLister.ReplicationControllers(namespace).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil, nil
	}
	return &controllerAndScale{rc.UID, replicasOrDefault(rc.Spec.Replicas)}, nil
}

func (dc *Controller) getPodStatefulSet(_ context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error) {
	if ok, err := verifyGroupKind(ref, "StatefulSet", ssGroups); !ok || err != nil {
		return nil, err
	}
	ss, err := dc.ssLister.StatefulSets(namespace).Get(ref.Name)
	if err != nil || ss.UID != ref.UID {
		return nil, nil
	}
	return &controllerAndScale{ss.UID, replicasOrDefault(ss.Spec.Replicas)}, nil
}

// getScaleController handles any other controller through its scale
// subresource (custom resources, or built-ins not seen in the listers).
func (dc *Controller) getScaleController(ctx context.Context, ref *metav1.OwnerReference, namespace string) (*controllerAndScale, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	mapping, err := dc.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return nil, err
	}
	gr := mapping.Resource.GroupResource()
	scale, err := dc.scaleNamespacer.Scales(namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// NotFound is either a missing object or a resource without a
		// scale subresource; only the latter is worth an error.
		isScale, err := dc.implementsScale(ctx, mapping.Resource)
		if err != nil {
			return nil, err
		}
		if !isScale {
			return nil, fmt.Errorf("%s does not implement the scale subresource", gr.String())
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if scale.UID != ref.UID {
		return nil, nil
	}
	return &controllerAndScale{scale.UID, scale.Spec.Replicas}, nil
}

// implementsScale asks discovery whether gvr serves a scale subresource in
// a Scale version the scale client can decode.
func (dc *Controller) implementsScale(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	list, err := dc.discoveryClient.ServerResourcesForGroupVersionWithContext(ctx, gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	want := gvr.Resource + "/scale"
	for _, r := range list.APIResources {
		if r.Name != want || r.Kind != "Scale" {
			continue
		}
		if slices.Contains(scaleVersions, schema.GroupVersion{Group: r.Group, Version: r.Version}) {
			return true, nil
		}
	}
	return false, nil
}
