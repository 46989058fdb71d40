package controller

import (
	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// NamespaceTerminating reports whether the lister shows namespace as being
// deleted. The API server refuses every create there (pods, ReplicaSets,
// events), so controllers skip them instead of sending requests bound to
// fail. A nil lister or an unknown namespace is not terminating.
func NamespaceTerminating(lister corelisters.NamespaceLister, namespace string) bool {
	if lister == nil || namespace == "" {
		return false
	}
	ns, err := lister.Get(namespace)
	if err != nil {
		return false
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == v1.NamespaceTerminating
}
