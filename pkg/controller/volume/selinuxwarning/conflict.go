package selinuxwarning

import (
	"k8s.io/client-go/tools/cache"
)

// Property names and event reasons of the two kinds of conflict.
const (
	propertyChangePolicy = "SELinuxChangePolicy"
	propertyLabel        = "SELinuxLabel"
	reasonChangePolicy   = "SELinuxChangePolicyConflict"
	reasonLabel          = "SELinuxLabelConflict"
	// reasonMultipleLabels: one pod's containers use a volume with
	// different labels.
	reasonMultipleLabels = "MultipleSELinuxLabels"
)

// Conflict is one pod's view of a volume shared with OtherPod under a
// different value of the same property. Conflicts come in pairs, one for
// each pod, so each gets its own event.
type Conflict struct {
	PropertyName string
	EventReason  string

	Pod           cache.ObjectName
	PropertyValue string

	OtherPod           cache.ObjectName
	OtherPropertyValue string
}

// EventMessage names the other pod only when it is in the same namespace,
// so events do not leak other namespaces' pod names. The missing space in
// the cross-namespace message is upstream's.
func (c *Conflict) EventMessage() string {
	value := `"` + c.PropertyValue + `"`
	if c.Pod.Namespace == c.OtherPod.Namespace {
		return c.PropertyName + " " + value + " conflicts with pod " + c.OtherPod.Name +
			" that uses the same volume as this pod with " + c.PropertyName + ` "` + c.OtherPropertyValue +
			`". If both pods land on the same node, only one of them may access the volume.`
	}
	return c.PropertyName + value + " conflicts with another pod that uses the same volume as this pod with a different " +
		c.PropertyName + ". If both pods land on the same node, only one of them may access the volume."
}

// conflictPair returns both pods' views of one conflict.
func conflictPair(property, reason string, pod cache.ObjectName, value string, other cache.ObjectName, otherValue string) []Conflict {
	return []Conflict{
		{PropertyName: property, EventReason: reason, Pod: pod, PropertyValue: value, OtherPod: other, OtherPropertyValue: otherValue},
		{PropertyName: property, EventReason: reason, Pod: other, PropertyValue: otherValue, OtherPod: pod, OtherPropertyValue: value},
	}
}

// involves reports whether pod is one of the conflict's two pods.
func (c *Conflict) involves(pod cache.ObjectName) bool {
	return c.Pod == pod || c.OtherPod == pod
}
