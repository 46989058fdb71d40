package persistentvolume

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func indexOf(t *testing.T, volumes ...*v1.PersistentVolume) volumeIndex {
	t.Helper()
	idx := newVolumeIndex()
	for _, pv := range volumes {
		if err := idx.store.Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

func TestAccessModesKey(t *testing.T) {
	got := accessModesKey([]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod, v1.ReadWriteMany, v1.ReadOnlyMany, v1.ReadWriteOnce, v1.ReadWriteOnce})
	if got != "RWO,ROX,RWX,RWOP" {
		t.Errorf("key = %q", got)
	}
	modes := accessModesFromKey("RWO, RWX")
	if len(modes) != 2 || modes[0] != v1.ReadWriteOnce || modes[1] != v1.ReadWriteMany {
		t.Errorf("modes = %v", modes)
	}
	if len(accessModesFromKey("")) != 0 {
		t.Error("empty key gives modes")
	}
}

func TestFindBestMatch(t *testing.T) {
	labelled := func(pv *v1.PersistentVolume, l map[string]string) *v1.PersistentVolume {
		pv.Labels = l
		return pv
	}
	withClass := func(pv *v1.PersistentVolume, class string) *v1.PersistentVolume {
		pv.Spec.StorageClassName = class
		return pv
	}
	withPhase := func(pv *v1.PersistentVolume, phase v1.PersistentVolumePhase) *v1.PersistentVolume {
		pv.Status.Phase = phase
		return pv
	}
	claim := newClaim("claim", "1Gi")
	preBound := newVolume("prebound", "10Gi")
	preBound.Spec.ClaimRef = claimRefTo(claim, false)
	otherUID := newVolume("other-uid", "1Gi")
	otherUID.Spec.ClaimRef = claimRefTo(claim, true)
	otherUID.Spec.ClaimRef.UID = "someone-else"
	deleting := newVolume("deleting", "1Gi")
	deleting.DeletionTimestamp = &metav1.Time{}
	block := newVolume("block", "1Gi")
	block.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	vac := newVolume("vac", "1Gi")
	vac.Spec.VolumeAttributesClassName = ptr.To("gold")
	betaClass := newVolume("beta", "1Gi")
	betaClass.Annotations = map[string]string{v1.BetaStorageClassAnnotation: "fast"}

	tests := []struct {
		name    string
		claim   func() *v1.PersistentVolumeClaim
		volumes []*v1.PersistentVolume
		delay   bool
		want    string
	}{
		{name: "smallest that fits", volumes: []*v1.PersistentVolume{newVolume("big", "10Gi"), newVolume("small", "500Mi"), newVolume("fit", "2Gi"), newVolume("exact", "1Gi")}, want: "exact"},
		{name: "too small", volumes: []*v1.PersistentVolume{newVolume("small", "500Mi")}, want: ""},
		{name: "fewest extra access modes first", volumes: []*v1.PersistentVolume{newVolume("rwo-rwx", "1Gi", v1.ReadWriteOnce, v1.ReadWriteMany), newVolume("rwo", "5Gi")}, want: "rwo"},
		{name: "missing access mode", claim: func() *v1.PersistentVolumeClaim { return newClaim("claim", "1Gi", v1.ReadWriteMany) }, volumes: []*v1.PersistentVolume{newVolume("rwo", "5Gi")}, want: ""},
		{name: "pre-bound wins over smaller", volumes: []*v1.PersistentVolume{newVolume("small", "1Gi"), preBound}, want: "prebound"},
		{name: "pre-bound to another instance is skipped", volumes: []*v1.PersistentVolume{otherUID}, want: ""},
		{name: "delay binding: only pre-bound", delay: true, volumes: []*v1.PersistentVolume{newVolume("small", "1Gi")}, want: ""},
		{name: "delay binding: pre-bound", delay: true, volumes: []*v1.PersistentVolume{newVolume("small", "1Gi"), preBound}, want: "prebound"},
		{name: "not Available", volumes: []*v1.PersistentVolume{withPhase(newVolume("pending", "1Gi"), v1.VolumePending), withPhase(newVolume("released", "1Gi"), v1.VolumeReleased)}, want: ""},
		{name: "being deleted", volumes: []*v1.PersistentVolume{deleting}, want: ""},
		{name: "volume mode", volumes: []*v1.PersistentVolume{block}, want: ""},
		{name: "volume attributes class must match", volumes: []*v1.PersistentVolume{vac}, want: ""},
		{name: "volume attributes class matching", claim: func() *v1.PersistentVolumeClaim {
			c := newClaim("claim", "1Gi")
			c.Spec.VolumeAttributesClassName = ptr.To("gold")
			return c
		}, volumes: []*v1.PersistentVolume{newVolume("plain", "1Gi"), vac}, want: "vac"},
		{name: "class must match", volumes: []*v1.PersistentVolume{withClass(newVolume("fast", "1Gi"), "fast")}, want: ""},
		{name: "class matching", claim: func() *v1.PersistentVolumeClaim {
			c := newClaim("claim", "1Gi")
			c.Spec.StorageClassName = ptr.To("fast")
			return c
		}, volumes: []*v1.PersistentVolume{newVolume("none", "1Gi"), withClass(newVolume("fast", "2Gi"), "fast")}, want: "fast"},
		{name: "beta class annotations", claim: func() *v1.PersistentVolumeClaim {
			c := newClaim("claim", "1Gi")
			c.Annotations = map[string]string{v1.BetaStorageClassAnnotation: "fast"}
			c.Spec.StorageClassName = ptr.To("ignored")
			return c
		}, volumes: []*v1.PersistentVolume{withClass(newVolume("spec", "1Gi"), "ignored"), betaClass}, want: "beta"},
		{name: "selector", claim: func() *v1.PersistentVolumeClaim {
			c := newClaim("claim", "1Gi")
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
			return c
		}, volumes: []*v1.PersistentVolume{newVolume("nolabel", "1Gi"), labelled(newVolume("silver", "1Gi"), map[string]string{"tier": "silver"}), labelled(newVolume("gold", "3Gi"), map[string]string{"tier": "gold"})}, want: "gold"},
		{name: "selector expressions", claim: func() *v1.PersistentVolumeClaim {
			c := newClaim("claim", "1Gi")
			c.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gold"}}}}
			return c
		}, volumes: []*v1.PersistentVolume{labelled(newVolume("gold", "1Gi"), map[string]string{"tier": "gold"}), labelled(newVolume("silver", "3Gi"), map[string]string{"tier": "silver"})}, want: "silver"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claim
			if tc.claim != nil {
				c = tc.claim()
			}
			got, err := indexOf(t, tc.volumes...).findBestMatchForClaim(c, tc.delay)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("matched %q, want %q", name, tc.want)
			}
		})
	}
}

func TestFindBestMatchBadSelector(t *testing.T) {
	c := newClaim("claim", "1Gi")
	c.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "bogus"}}}
	if _, err := indexOf(t, newVolume("pv", "1Gi")).findBestMatchForClaim(c, false); err == nil {
		t.Error("no error for an invalid selector")
	}
}
