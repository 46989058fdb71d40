package devicetainteviction

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDueTime(t *testing.T) {
	added := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tn := taint("k", resourceapi.DeviceTaintEffectNoExecute, added)
	exists := func(effect resourceapi.DeviceTaintEffect, seconds *int64) resourceapi.DeviceToleration {
		return resourceapi.DeviceToleration{Key: "k", Operator: resourceapi.DeviceTolerationOpExists, Effect: effect, TolerationSeconds: seconds}
	}
	for name, tc := range map[string]struct {
		tolerations []resourceapi.DeviceToleration
		want        time.Duration
		evicts      bool
	}{
		"none":                 {nil, 0, true},
		"seconds":              {[]resourceapi.DeviceToleration{exists(resourceapi.DeviceTaintEffectNoExecute, ptr.To[int64](30))}, 30 * time.Second, true},
		"smallest-seconds":     {[]resourceapi.DeviceToleration{exists(resourceapi.DeviceTaintEffectNoExecute, ptr.To[int64](30)), exists(resourceapi.DeviceTaintEffectNoExecute, ptr.To[int64](10))}, 10 * time.Second, true},
		"negative-is-zero":     {[]resourceapi.DeviceToleration{exists(resourceapi.DeviceTaintEffectNoExecute, ptr.To[int64](-5))}, 0, true},
		"forever":              {[]resourceapi.DeviceToleration{exists(resourceapi.DeviceTaintEffectNoExecute, ptr.To[int64](10)), exists(resourceapi.DeviceTaintEffectNoExecute, nil)}, 0, false},
		"empty-effect-ignored": {[]resourceapi.DeviceToleration{exists("", nil)}, 0, true},
		"other-key":            {[]resourceapi.DeviceToleration{{Key: "x", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}}, 0, true},
		"equal-value":          {[]resourceapi.DeviceToleration{{Key: "k", Value: "v", Effect: resourceapi.DeviceTaintEffectNoExecute}}, 0, false},
		"other-value":          {[]resourceapi.DeviceToleration{{Key: "k", Value: "w", Operator: resourceapi.DeviceTolerationOpEqual, Effect: resourceapi.DeviceTaintEffectNoExecute}}, 0, true},
		"any-key":              {[]resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}}, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			due, evicts := dueTime(&tn, tc.tolerations)
			if evicts != tc.evicts {
				t.Fatalf("evicts %v, want %v", evicts, tc.evicts)
			}
			if evicts && !due.Equal(ptr.To(metav1.NewTime(added.Add(tc.want)))) {
				t.Errorf("due %v, want %v", due, added.Add(tc.want))
			}
		})
	}
}

func TestClaimEviction(t *testing.T) {
	early := time.Now().Add(-time.Hour).Truncate(time.Second)
	late := early.Add(time.Minute)
	pools := map[poolKey]*pool{}
	addSlice := func(s *resourceapi.ResourceSlice) {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if pools[k] == nil {
			pools[k] = &pool{}
		}
		pools[k].add(s)
	}
	claim := claimFor("c", []string{"dev-0", "dev-1"})

	addSlice(slice("s", 1, 2, taint("ignored", resourceapi.DeviceTaintEffectNoSchedule, early), taint("evict", resourceapi.DeviceTaintEffectNoExecute, late)))
	e := claimEviction(claim, pools, nil)
	if e == nil || !e.when.Time.Equal(late) || len(e.reasons) != 1 || e.reasons[0].index != 1 {
		t.Fatalf("slice taint: %v", e)
	}

	rules := map[string]*resourceapi.DeviceTaintRule{
		"b": rule("b", resourceapi.DeviceTaintEffectNoExecute, "dev-1", early),
		"a": rule("a", resourceapi.DeviceTaintEffectNoExecute, "dev-9", early),
	}
	e = claimEviction(claim, pools, rules)
	if e == nil || !e.when.Time.Equal(early) || len(e.reasons) != 2 || e.reasons[0].rule == nil || e.reasons[1].slice == nil {
		t.Fatalf("rule first, then slice taint: %v", e)
	}

	// A newer generation of the pool replaces the tainted slice.
	addSlice(slice("s2", 2, 2))
	if e := claimEviction(claim, pools, nil); e != nil {
		t.Errorf("old generation counted: %v", e)
	}
	forever := tolerate(claim, resourceapi.DeviceToleration{Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute})
	if e := claimEviction(forever, pools, rules); e != nil {
		t.Errorf("tolerated: %v", e)
	}
}

func TestPoolGenerations(t *testing.T) {
	p := &pool{}
	old, cur := slice("old", 1, 1), slice("cur", 2, 1)
	p.add(old)
	p.add(cur)
	if p.maxGeneration != 2 {
		t.Fatalf("max generation %d", p.maxGeneration)
	}
	p.remove(cur)
	if p.maxGeneration != 1 {
		t.Errorf("after removing the newest: %d", p.maxGeneration)
	}
	if s, d := p.device("dev-0"); s != old || d == nil {
		t.Errorf("device lookup: %v %v", s, d)
	}
}

func TestMergeEvictions(t *testing.T) {
	r1, r2 := rule("a", resourceapi.DeviceTaintEffectNoExecute, "d", time.Now()), rule("b", resourceapi.DeviceTaintEffectNoExecute, "d", time.Now())
	t1, t2 := metav1.NewTime(time.Now()), metav1.NewTime(time.Now().Add(time.Minute))
	a := &eviction{when: t2, reasons: []taintSource{{rule: r2}}}
	b := &eviction{when: t1, reasons: []taintSource{{rule: r1}}}
	m := a.merge(b)
	if !m.when.Equal(&t1) || len(m.reasons) != 2 || m.reasons[0].rule != r1 {
		t.Errorf("merge: %v", m)
	}
	if a.merge(nil) != a || (*eviction)(nil).merge(b) != b {
		t.Error("merge with nil")
	}
	if !(*eviction)(nil).equal(nil) || a.equal(nil) || !a.equal(&eviction{when: t2, reasons: []taintSource{{rule: r2}}}) {
		t.Error("equal")
	}
}
