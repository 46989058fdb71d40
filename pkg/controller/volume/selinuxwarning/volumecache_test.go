package selinuxwarning

import (
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

func objName(ns, name string) cache.ObjectName { return cache.ObjectName{Namespace: ns, Name: name} }

const (
	mountOption = v1.SELinuxChangePolicyMountOption
	recursive   = v1.SELinuxChangePolicyRecursive
)

func sortedConflicts(c []Conflict) []Conflict {
	c = slices.Clone(c)
	sort.Slice(c, func(i, j int) bool {
		a, b := c[i], c[j]
		if a.PropertyName != b.PropertyName {
			return a.PropertyName < b.PropertyName
		}
		return a.Pod.String() < b.Pod.String()
	})
	return c
}

func TestVolumeCacheAddVolume(t *testing.T) {
	podA, podB := objName("ns", "podA"), objName("ns", "podB")
	for _, tc := range []struct {
		name       string
		labelB     string
		policyB    v1.PodSELinuxChangePolicy
		wantReason []string
	}{
		{name: "same label and policy", labelB: "u:r:labelA", policyB: mountOption},
		{name: "different label", labelB: "u:r:labelB", policyB: mountOption, wantReason: []string{reasonLabel, reasonLabel}},
		{name: "different policy", labelB: "", policyB: recursive, wantReason: []string{reasonChangePolicy, reasonChangePolicy}},
		{name: "incomparable label (missing type)", labelB: "u:r", policyB: mountOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newVolumeCache()
			if got := c.addVolume("vol1", podA, "u:r:labelA", mountOption, ""); len(got) != 0 {
				t.Fatalf("first pod conflicts: %v", got)
			}
			got := c.addVolume("vol1", podB, tc.labelB, tc.policyB, "")
			var reasons []string
			for _, conflict := range got {
				reasons = append(reasons, conflict.EventReason)
			}
			if !slices.Equal(reasons, tc.wantReason) {
				t.Fatalf("reasons %v, want %v", reasons, tc.wantReason)
			}
			if len(c.getConflicts()) != len(tc.wantReason) {
				t.Fatalf("cached conflicts %v", c.getConflicts())
			}
			// The same use again reports nothing new.
			if again := c.addVolume("vol1", podB, tc.labelB, tc.policyB, ""); len(again) != 0 {
				t.Fatalf("re-add reported %v", again)
			}
		})
	}
}

func TestVolumeCacheConflictPair(t *testing.T) {
	c := newVolumeCache()
	c.addVolume("vol1", objName("ns", "podA"), "u:r:t:s0:c1", mountOption, "")
	got := sortedConflicts(c.addVolume("vol1", objName("ns", "podB"), "u:r:t:s0:c2", mountOption, ""))
	want := []Conflict{
		{PropertyName: propertyLabel, EventReason: reasonLabel, Pod: objName("ns", "podA"), PropertyValue: "u:r:t:s0:c1", OtherPod: objName("ns", "podB"), OtherPropertyValue: "u:r:t:s0:c2"},
		{PropertyName: propertyLabel, EventReason: reasonLabel, Pod: objName("ns", "podB"), PropertyValue: "u:r:t:s0:c2", OtherPod: objName("ns", "podA"), OtherPropertyValue: "u:r:t:s0:c1"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestVolumeCacheReplacedPodDropsOldConflicts(t *testing.T) {
	c := newVolumeCache()
	c.addVolume("vol1", objName("ns", "podA"), "u:r:a", mountOption, "")
	c.addVolume("vol1", objName("ns", "podB"), "u:r:b", mountOption, "")
	if len(c.getConflicts()) != 2 {
		t.Fatalf("want a conflict, got %v", c.getConflicts())
	}
	c.addVolume("vol1", objName("ns", "podB"), "u:r:a", mountOption, "")
	if got := c.getConflicts(); len(got) != 0 {
		t.Fatalf("stale conflicts %v", got)
	}
}

func TestVolumeCacheDeletePod(t *testing.T) {
	podA, podB, podC := objName("ns", "podA"), objName("ns", "podB"), objName("ns", "podC")
	c := newVolumeCache()
	c.addVolume("vol1", podA, "u:r:a", mountOption, "")
	c.addVolume("vol1", podB, "u:r:b", mountOption, "")
	c.addVolume("vol2", podB, "u:r:b", mountOption, "")
	c.addVolume("vol2", podC, "u:r:c", mountOption, "")
	if got := len(c.getConflicts()); got != 4 {
		t.Fatalf("want 4 conflicts, got %d", got)
	}
	c.deletePod(podA)
	if got := c.getConflicts(); len(got) != 2 || got[0].involves(podA) || got[1].involves(podA) {
		t.Fatalf("after deleting podA: %v", got)
	}
	c.deletePod(podB)
	if got := c.getConflicts(); len(got) != 0 {
		t.Fatalf("after deleting podB: %v", got)
	}
	if _, ok := c.volumes["vol1"]; ok {
		t.Error("vol1 still cached without pods")
	}
	c.deletePod(podB) // no-op
	if got := c.podsForCSIDriver(""); !slices.Equal(got, []cache.ObjectName{podC}) {
		t.Errorf("remaining pods %v", got)
	}
}

func TestVolumeCachePodsForCSIDriver(t *testing.T) {
	c := newVolumeCache()
	c.addVolume("kubernetes.io/csi/d1^h1", objName("ns", "podA"), "", recursive, "d1")
	c.addVolume("kubernetes.io/csi/d2^h2", objName("ns", "podB"), "", recursive, "d2")
	if got := c.podsForCSIDriver("d1"); !slices.Equal(got, []cache.ObjectName{objName("ns", "podA")}) {
		t.Errorf("got %v", got)
	}
}
