package devicetainteviction

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// poolKey identifies a resource pool.
type poolKey struct {
	driver, pool string
}

// pool holds the ResourceSlices of one pool by name. Only slices of the
// highest generation count: older ones are left-overs being replaced.
type pool struct {
	slices        map[string]*resourceapi.ResourceSlice
	maxGeneration int64
}

func (p *pool) add(slice *resourceapi.ResourceSlice) {
	if slice == nil {
		return
	}
	if p.slices == nil {
		p.slices = map[string]*resourceapi.ResourceSlice{}
		p.maxGeneration = math.MinInt64
	}
	p.slices[slice.Name] = slice
	p.maxGeneration = max(p.maxGeneration, slice.Spec.Pool.Generation)
}

func (p *pool) remove(slice *resourceapi.ResourceSlice) {
	if slice == nil {
		return
	}
	delete(p.slices, slice.Name)
	if slice.Spec.Pool.Generation == p.maxGeneration {
		p.maxGeneration = math.MinInt64
		for _, s := range p.slices {
			p.maxGeneration = max(p.maxGeneration, s.Spec.Pool.Generation)
		}
	}
}

// current yields the slices of the highest generation.
func (p *pool) current(yield func(*resourceapi.ResourceSlice) bool) {
	if p == nil {
		return
	}
	for _, slice := range p.slices {
		if slice.Spec.Pool.Generation == p.maxGeneration && !yield(slice) {
			return
		}
	}
}

// device finds a device of the current generation by name.
func (p *pool) device(name string) (*resourceapi.ResourceSlice, *resourceapi.Device) {
	for slice := range p.current {
		for i := range slice.Spec.Devices {
			if slice.Spec.Devices[i].Name == name {
				return slice, &slice.Spec.Devices[i]
			}
		}
	}
	return nil, nil
}

// noExecuteTaints maps each device of the current generation that has
// NoExecute taints to them, in slice order.
func (p *pool) noExecuteTaints() map[string][]resourceapi.DeviceTaint {
	out := map[string][]resourceapi.DeviceTaint{}
	for slice := range p.current {
		for _, device := range slice.Spec.Devices {
			for _, taint := range device.Taints {
				if taint.Effect == resourceapi.DeviceTaintEffectNoExecute {
					out[device.Name] = append(out[device.Name], taint)
				}
			}
		}
	}
	return out
}

// taintSource is one NoExecute taint affecting an allocated device: either
// a DeviceTaintRule or taint number index of a device in a ResourceSlice.
// It is comparable so that sets of them can be built.
type taintSource struct {
	rule   *resourceapi.DeviceTaintRule
	slice  *resourceapi.ResourceSlice
	device string
	index  int
}

func (t taintSource) taint() *resourceapi.DeviceTaint {
	if t.rule != nil {
		return &t.rule.Spec.Taint
	}
	for i := range t.slice.Spec.Devices {
		if t.slice.Spec.Devices[i].Name == t.device {
			return &t.slice.Spec.Devices[i].Taints[t.index]
		}
	}
	return nil
}

func (t taintSource) String() string {
	if t.rule != nil {
		return fmt.Sprintf("DeviceTaintRule %s", refOf(t.rule))
	}
	return fmt.Sprintf("ResourceSlice %s %s/%s/%s taint #%d", refOf(t.slice), t.slice.Spec.Driver, t.slice.Spec.Pool.Name, t.device, t.index)
}

// compareSources orders rules (by name) before slice taints (by driver,
// pool, device, index).
func compareSources(a, b taintSource) int {
	switch {
	case a.rule != nil && b.rule != nil:
		return strings.Compare(a.rule.Name, b.rule.Name)
	case a.rule != nil:
		return -1
	case b.rule != nil:
		return 1
	case a.slice == nil || b.slice == nil:
		return 0
	}
	return cmp.Or(
		strings.Compare(a.slice.Spec.Driver, b.slice.Spec.Driver),
		strings.Compare(a.slice.Spec.Pool.Name, b.slice.Spec.Pool.Name),
		strings.Compare(a.device, b.device),
		cmp.Compare(a.index, b.index),
	)
}

// eviction says when pods using something tainted must go, and because of
// which taints (sorted with compareSources).
type eviction struct {
	when    metav1.Time
	reasons []taintSource
}

func (e *eviction) String() string {
	parts := make([]string, 0, len(e.reasons))
	for _, r := range e.reasons {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("%s (%s)", e.when, strings.Join(parts, ", "))
}

func (e *eviction) equal(o *eviction) bool {
	if e == nil || o == nil {
		return e == o
	}
	return e.when.Equal(&o.when) && slices.Equal(e.reasons, o.reasons)
}

// merge combines the evictions of two claims of one pod: the earlier time,
// all reasons.
func (e *eviction) merge(o *eviction) *eviction {
	if e == nil {
		return o
	}
	if o == nil {
		return e
	}
	merged := &eviction{when: e.when, reasons: slices.Clone(e.reasons)}
	if o.when.Before(&merged.when) {
		merged.when = o.when
	}
	for _, r := range o.reasons {
		if i, found := slices.BinarySearchFunc(merged.reasons, r, compareSources); !found {
			merged.reasons = slices.Insert(merged.reasons, i, r)
		}
	}
	if merged.equal(e) {
		return e
	}
	return merged
}

// hasRule reports whether a DeviceTaintRule with that UID is among the reasons.
func (e *eviction) hasRule(rule *resourceapi.DeviceTaintRule) bool {
	for _, r := range e.reasons {
		if r.rule != nil && r.rule.UID == rule.UID {
			return true
		}
	}
	return false
}

// ruleMatchesDevice reports whether the rule's selector picks the device.
// A rule without a selector picks nothing.
func ruleMatchesDevice(rule *resourceapi.DeviceTaintRule, driver, poolName, device string) bool {
	sel := rule.Spec.DeviceSelector
	if sel == nil {
		return false
	}
	return (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == poolName) &&
		(sel.Device == nil || *sel.Device == device)
}

// toleratesTaint is the device toleration match: an empty effect or key
// matches any, Exists any value, Equal (or empty) the same value.
func toleratesTaint(toleration resourceapi.DeviceToleration, taint *resourceapi.DeviceTaint) bool {
	if toleration.Effect != "" && toleration.Effect != taint.Effect {
		return false
	}
	if toleration.Key != "" && toleration.Key != taint.Key {
		return false
	}
	switch toleration.Operator {
	case "", resourceapi.DeviceTolerationOpEqual:
		return toleration.Value == taint.Value
	case resourceapi.DeviceTolerationOpExists:
		return true
	}
	return false
}

// claimEviction computes when pods using the allocated claim must be
// evicted: the earliest "taint added + tolerationSeconds" over all
// NoExecute taints of its devices, from their ResourceSlices or from the
// given NoExecute rules, that are not tolerated forever. Only tolerations
// with the NoExecute effect spelled out count. nil when nothing evicts.
func claimEviction(claim *resourceapi.ResourceClaim, pools map[poolKey]*pool, rules map[string]*resourceapi.DeviceTaintRule) *eviction {
	var when *metav1.Time
	var reasons sets.Set[taintSource]
	for _, result := range claim.Status.Allocation.Devices.Results {
		var sources []taintSource
		if slice, device := pools[poolKey{result.Driver, result.Pool}].device(result.Device); device != nil {
			for i, taint := range device.Taints {
				if taint.Effect == resourceapi.DeviceTaintEffectNoExecute {
					sources = append(sources, taintSource{slice: slice, device: device.Name, index: i})
				}
			}
		}
		for _, rule := range rules {
			if ruleMatchesDevice(rule, result.Driver, result.Pool, result.Device) {
				sources = append(sources, taintSource{rule: rule})
			}
		}

		for _, source := range sources {
			taint := source.taint()
			if taint.TimeAdded == nil {
				// The apiserver always sets it; without it there is no deadline.
				continue
			}
			due, evicts := dueTime(taint, result.Tolerations)
			if !evicts {
				continue
			}
			if reasons == nil {
				reasons = sets.New[taintSource]()
			}
			reasons.Insert(source)
			if when == nil || due.Before(when) {
				when = &due
			}
		}
	}
	if when == nil {
		return nil
	}
	e := &eviction{when: *when, reasons: reasons.UnsortedList()}
	slices.SortFunc(e.reasons, compareSources)
	return e
}

// dueTime applies the device's tolerations to one taint: false when one
// tolerates it forever, else the time it was added plus the smallest
// tolerationSeconds (negative counts as zero) of the matching ones.
func dueTime(taint *resourceapi.DeviceTaint, tolerations []resourceapi.DeviceToleration) (metav1.Time, bool) {
	seconds := int64(-1)
	for _, toleration := range tolerations {
		if toleration.Effect != resourceapi.DeviceTaintEffectNoExecute || !toleratesTaint(toleration, taint) {
			continue
		}
		if toleration.TolerationSeconds == nil {
			return metav1.Time{}, false
		}
		s := max(*toleration.TolerationSeconds, 0)
		if seconds < 0 || s < seconds {
			seconds = s
		}
	}
	if seconds < 0 {
		return *taint.TimeAdded, true
	}
	return metav1.NewTime(taint.TimeAdded.Add(time.Duration(seconds) * time.Second)), true
}
