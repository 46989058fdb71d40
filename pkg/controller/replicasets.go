package controller

import (
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// FilterActiveReplicaSets returns the ReplicaSets that want pods
// (spec.replicas > 0).
func FilterActiveReplicaSets(replicaSets []*apps.ReplicaSet) []*apps.ReplicaSet {
	return FilterReplicaSets(replicaSets, func(rs *apps.ReplicaSet) bool {
		return rs != nil && rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0
	})
}

// FilterReplicaSets returns the ReplicaSets for which keep is true.
func FilterReplicaSets(replicaSets []*apps.ReplicaSet, keep func(*apps.ReplicaSet) bool) []*apps.ReplicaSet {
	var out []*apps.ReplicaSet
	for _, rs := range replicaSets {
		if keep(rs) {
			out = append(out, rs)
		}
	}
	return out
}

func replicasOf(rs *apps.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// ReplicaSetsByCreationTimestamp sorts oldest first, by name on ties.
type ReplicaSetsByCreationTimestamp []*apps.ReplicaSet

func (o ReplicaSetsByCreationTimestamp) Len() int      { return len(o) }
func (o ReplicaSetsByCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsByCreationTimestamp) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// ReplicaSetsBySizeOlder sorts largest spec.replicas first, older first on ties.
type ReplicaSetsBySizeOlder []*apps.ReplicaSet

func (o ReplicaSetsBySizeOlder) Len() int      { return len(o) }
func (o ReplicaSetsBySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeOlder) Less(i, j int) bool {
	if ri, rj := replicasOf(o[i]), replicasOf(o[j]); ri != rj {
		return ri > rj
	}
	return ReplicaSetsByCreationTimestamp(o).Less(i, j)
}

// ReplicaSetsBySizeNewer sorts largest spec.replicas first, newer first on ties.
type ReplicaSetsBySizeNewer []*apps.ReplicaSet

func (o ReplicaSetsBySizeNewer) Len() int      { return len(o) }
func (o ReplicaSetsBySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeNewer) Less(i, j int) bool {
	if ri, rj := replicasOf(o[i]), replicasOf(o[j]); ri != rj {
		return ri > rj
	}
	return ReplicaSetsByCreationTimestamp(o).Less(j, i)
}

// ControllersByCreationTimestamp sorts ReplicationControllers oldest first,
// by name on ties.
type ControllersByCreationTimestamp []*v1.ReplicationController

func (o ControllersByCreationTimestamp) Len() int      { return len(o) }
func (o ControllersByCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ControllersByCreationTimestamp) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}
