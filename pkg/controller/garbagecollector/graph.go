package garbagecollector

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectReference identifies a node: the owner-reference coordinates
// (apiVersion, kind, name, uid) plus the namespace, which an owner reference
// does not carry. It is comparable, so it doubles as a cache key.
type objectReference struct {
	metav1.OwnerReference
	Namespace string
}

func (r objectReference) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID)
}

// MarshalLog keeps structured logs short (no controller/blockOwnerDeletion).
func (r objectReference) MarshalLog() interface{} {
	return struct {
		Name       string    `json:"name"`
		Namespace  string    `json:"namespace"`
		APIVersion string    `json:"apiVersion"`
		Kind       string    `json:"kind"`
		UID        types.UID `json:"uid"`
	}{r.Name, r.Namespace, r.APIVersion, r.Kind, r.UID}
}

// node is one object in the dependency graph. Only the graph builder's
// single goroutine mutates dependents/owners membership; workers read them,
// hence the locks.
type node struct {
	identity objectReference

	mu sync.RWMutex
	// dependents are the nodes whose ownerReferences name this node's UID.
	dependents map[*node]struct{}
	// deletingDependents: deleted in foreground, waiting for blocking dependents.
	deletingDependents bool
	// beingDeleted: deletionTimestamp is set.
	beingDeleted bool
	// virtual: added because a dependent referenced it; never seen by an informer.
	virtual bool
	// owners as last observed on the object.
	owners []metav1.OwnerReference
}

func newNode(identity objectReference, owners []metav1.OwnerReference) *node {
	return &node{identity: identity, dependents: map[*node]struct{}{}, owners: owners}
}

// clone copies the node with its state, used when a node's identity must
// change (nodes are map keys in their owners' dependents and are otherwise
// treated as immutable identities).
func (n *node) clone() *node {
	n.mu.RLock()
	defer n.mu.RUnlock()
	c := &node{
		identity:           n.identity,
		dependents:         make(map[*node]struct{}, len(n.dependents)),
		deletingDependents: n.deletingDependents,
		beingDeleted:       n.beingDeleted,
		virtual:            n.virtual,
		owners:             append([]metav1.OwnerReference(nil), n.owners...),
	}
	for d := range n.dependents {
		c.dependents[d] = struct{}{}
	}
	return c
}

func (n *node) markBeingDeleted() {
	n.mu.Lock()
	n.beingDeleted = true
	n.mu.Unlock()
}

func (n *node) isBeingDeleted() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.beingDeleted
}

func (n *node) markObserved() {
	n.mu.Lock()
	n.virtual = false
	n.mu.Unlock()
}

func (n *node) isObserved() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return !n.virtual
}

func (n *node) markDeletingDependents() {
	n.mu.Lock()
	n.deletingDependents = true
	n.mu.Unlock()
}

func (n *node) isDeletingDependents() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.deletingDependents
}

func (n *node) setOwners(owners []metav1.OwnerReference) {
	n.mu.Lock()
	n.owners = owners
	n.mu.Unlock()
}

func (n *node) getOwners() []metav1.OwnerReference {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.owners
}

func (n *node) addDependent(d *node) {
	n.mu.Lock()
	n.dependents[d] = struct{}{}
	n.mu.Unlock()
}

func (n *node) deleteDependent(d *node) {
	n.mu.Lock()
	delete(n.dependents, d)
	n.mu.Unlock()
}

func (n *node) dependentsLength() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.dependents)
}

func (n *node) getDependents() []*node {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*node, 0, len(n.dependents))
	for d := range n.dependents {
		out = append(out, d)
	}
	return out
}

// blockingDependents are the dependents whose reference to n sets
// blockOwnerDeletion: a foreground deletion of n waits for them.
func (n *node) blockingDependents() []*node {
	var out []*node
	for _, d := range n.getDependents() {
		for _, ref := range d.getOwners() {
			if ref.UID == n.identity.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				out = append(out, d)
			}
		}
	}
	return out
}

func (n *node) String() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return fmt.Sprintf("%s virtual=%v beingDeleted=%v deletingDependents=%v owners=%d dependents=%d",
		n.identity, n.virtual, n.beingDeleted, n.deletingDependents, len(n.owners), len(n.dependents))
}

// ownerReferenceCoordinates strips a reference down to what identifies the
// owner (dropping controller and blockOwnerDeletion).
func ownerReferenceCoordinates(ref metav1.OwnerReference) metav1.OwnerReference {
	return metav1.OwnerReference{UID: ref.UID, Name: ref.Name, Kind: ref.Kind, APIVersion: ref.APIVersion}
}

func ownerReferenceMatchesCoordinates(a, b metav1.OwnerReference) bool {
	return a.UID == b.UID && a.Name == b.Name && a.Kind == b.Kind && a.APIVersion == b.APIVersion
}

// uidToNode is the graph's index, read by workers and written by the
// graph builder.
type uidToNode struct {
	mu    sync.RWMutex
	nodes map[types.UID]*node
}

func newUIDToNode() *uidToNode { return &uidToNode{nodes: map[types.UID]*node{}} }

func (m *uidToNode) Write(n *node) {
	m.mu.Lock()
	m.nodes[n.identity.UID] = n
	m.mu.Unlock()
}

func (m *uidToNode) Read(uid types.UID) (*node, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, ok := m.nodes[uid]
	return n, ok
}

func (m *uidToNode) Delete(uid types.UID) {
	m.mu.Lock()
	delete(m.nodes, uid)
	m.mu.Unlock()
}

func (m *uidToNode) snapshot() []*node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*node, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n)
	}
	return out
}
