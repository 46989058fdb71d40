package util

import (
	"fmt"
	"sort"
	"sync"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// EqualIgnoreHash compares two pod templates semantically, ignoring the
// pod-template-hash label: the hash is added to ReplicaSets, never to the
// Deployment, and can change across API versions.
func EqualIgnoreHash(a, b *v1.PodTemplateSpec) bool {
	// Shallow copies with their own label maps: nothing else is modified,
	// and deep-copying two templates per comparison dominated the
	// controller's allocations (every sync compares every ReplicaSet).
	ac, bc := *a, *b
	ac.Labels, bc.Labels = withoutHashLabel(a.Labels), withoutHashLabel(b.Labels)
	return apiequality.Semantic.DeepEqual(&ac, &bc)
}

// withoutHashLabel returns l without the pod-template-hash label; like a
// deep copy with the key deleted, a non-nil map stays non-nil.
func withoutHashLabel(l map[string]string) map[string]string {
	if _, ok := l[apps.DefaultDeploymentUniqueLabelKey]; !ok {
		return l
	}
	out := make(map[string]string, len(l)-1)
	for k, v := range l {
		if k != apps.DefaultDeploymentUniqueLabelKey {
			out[k] = v
		}
	}
	return out
}

// FindNewReplicaSet returns the oldest ReplicaSet whose template matches the
// Deployment's, or nil. It sorts rsList by creation time.
func FindNewReplicaSet(d *apps.Deployment, rsList []*apps.ReplicaSet) *apps.ReplicaSet {
	return (*TemplateMatches)(nil).FindNewReplicaSet(d, rsList)
}

// FindOldReplicaSets returns the old ReplicaSets that still have replicas,
// and all old ReplicaSets.
func FindOldReplicaSets(d *apps.Deployment, rsList []*apps.ReplicaSet) ([]*apps.ReplicaSet, []*apps.ReplicaSet) {
	return (*TemplateMatches)(nil).FindOldReplicaSets(d, rsList)
}

// TemplateMatches remembers which ReplicaSet templates match which
// Deployment templates. Every sync of a Deployment compares its template
// with each of its ReplicaSets' (twice), and the semantic comparison of
// two pod templates is the controller's largest allocator; a template only
// changes with its object's generation, so a result holds as long as both
// generations do. A nil *TemplateMatches compares every time.
type TemplateMatches struct {
	mu sync.Mutex
	m  map[templatePair]bool
}

type templatePair struct {
	rs, d       types.UID
	rsGen, dGen int64
}

// maxTemplatePairs bounds the memory: past it the memo starts over.
const maxTemplatePairs = 1 << 16

// NewTemplateMatches returns an empty memo.
func NewTemplateMatches() *TemplateMatches {
	return &TemplateMatches{m: map[templatePair]bool{}}
}

// Equal is EqualIgnoreHash of rs's and d's templates. Objects without a UID
// or generation (never stored by an API server) are compared every time.
func (c *TemplateMatches) Equal(rs *apps.ReplicaSet, d *apps.Deployment) bool {
	if c == nil || rs.UID == "" || d.UID == "" || rs.Generation == 0 || d.Generation == 0 {
		return EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template)
	}
	key := templatePair{rs: rs.UID, d: d.UID, rsGen: rs.Generation, dGen: d.Generation}
	c.mu.Lock()
	equal, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return equal
	}
	equal = EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template)
	c.mu.Lock()
	if len(c.m) >= maxTemplatePairs {
		c.m = map[templatePair]bool{}
	}
	c.m[key] = equal
	c.mu.Unlock()
	return equal
}

// FindNewReplicaSet is FindNewReplicaSet with remembered comparisons.
func (c *TemplateMatches) FindNewReplicaSet(d *apps.Deployment, rsList []*apps.ReplicaSet) *apps.ReplicaSet {
	sort.Sort(ReplicaSetsByCreationTimestamp(rsList))
	for _, rs := range rsList {
		// More than one can match after some upgrades; the oldest wins.
		if c.Equal(rs, d) {
			return rs
		}
	}
	return nil
}

// FindOldReplicaSets is FindOldReplicaSets with remembered comparisons.
func (c *TemplateMatches) FindOldReplicaSets(d *apps.Deployment, rsList []*apps.ReplicaSet) ([]*apps.ReplicaSet, []*apps.ReplicaSet) {
	var active, all []*apps.ReplicaSet
	newRS := c.FindNewReplicaSet(d, rsList)
	for _, rs := range rsList {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		all = append(all, rs)
		if *rs.Spec.Replicas != 0 {
			active = append(active, rs)
		}
	}
	return active, all
}

// SetFromReplicaSetTemplate copies a ReplicaSet's template into d, without the
// pod-template-hash label.
func SetFromReplicaSetTemplate(d *apps.Deployment, template v1.PodTemplateSpec) *apps.Deployment {
	d.Spec.Template.ObjectMeta = template.ObjectMeta
	d.Spec.Template.Spec = template.Spec
	lbls := make(map[string]string, len(template.Labels))
	for k, v := range template.Labels {
		if k != apps.DefaultDeploymentUniqueLabelKey {
			lbls[k] = v
		}
	}
	d.Spec.Template.Labels = lbls
	return d
}

// GetDeploymentsForReplicaSet lists the Deployments whose selector matches rs.
// An empty selector matches nothing here. It errors when none match.
func GetDeploymentsForReplicaSet(lister appslisters.DeploymentLister, rs *apps.ReplicaSet) ([]*apps.Deployment, error) {
	if len(rs.Labels) == 0 {
		return nil, fmt.Errorf("no deployments found for ReplicaSet %v because it has no labels", rs.Name)
	}
	all, err := lister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*apps.Deployment
	for _, d := range all {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("could not find deployments set for ReplicaSet %s in namespace %s with labels: %v", rs.Name, rs.Namespace, rs.Labels)
	}
	return out, nil
}

// FilterActiveReplicaSets keeps the ReplicaSets with spec.replicas > 0.
func FilterActiveReplicaSets(rss []*apps.ReplicaSet) []*apps.ReplicaSet {
	return FilterReplicaSets(rss, func(rs *apps.ReplicaSet) bool { return rs != nil && *rs.Spec.Replicas > 0 })
}

// FilterReplicaSets keeps the ReplicaSets keep accepts.
func FilterReplicaSets(rss []*apps.ReplicaSet, keep func(*apps.ReplicaSet) bool) []*apps.ReplicaSet {
	var out []*apps.ReplicaSet
	for _, rs := range rss {
		if keep(rs) {
			out = append(out, rs)
		}
	}
	return out
}

// ReplicaSetsByCreationTimestamp sorts oldest first, by name on ties.
type ReplicaSetsByCreationTimestamp []*apps.ReplicaSet

func (o ReplicaSetsByCreationTimestamp) Len() int      { return len(o) }
func (o ReplicaSetsByCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsByCreationTimestamp) Less(i, j int) bool {
	return olderRS(o[i], o[j])
}

func olderRS(a, b *apps.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// ReplicaSetsBySizeOlder sorts largest first, older first on ties: the order
// in which proportional scale-down takes replicas away.
type ReplicaSetsBySizeOlder []*apps.ReplicaSet

func (o ReplicaSetsBySizeOlder) Len() int      { return len(o) }
func (o ReplicaSetsBySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeOlder) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return olderRS(o[i], o[j])
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// ReplicaSetsBySizeNewer sorts largest first, newer first on ties: the order
// in which proportional scale-up hands replicas out.
type ReplicaSetsBySizeNewer []*apps.ReplicaSet

func (o ReplicaSetsBySizeNewer) Len() int      { return len(o) }
func (o ReplicaSetsBySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsBySizeNewer) Less(i, j int) bool {
	if *o[i].Spec.Replicas == *o[j].Spec.Replicas {
		return olderRS(o[j], o[i])
	}
	return *o[i].Spec.Replicas > *o[j].Spec.Replicas
}

// ReplicaSetsByRevision sorts by revision, oldest first, falling back to
// creation time when revisions tie or do not parse.
type ReplicaSetsByRevision []*apps.ReplicaSet

func (o ReplicaSetsByRevision) Len() int      { return len(o) }
func (o ReplicaSetsByRevision) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o ReplicaSetsByRevision) Less(i, j int) bool {
	ri, erri := Revision(o[i])
	rj, errj := Revision(o[j])
	if erri != nil || errj != nil || ri == rj {
		return olderRS(o[i], o[j])
	}
	return ri < rj
}
