package evaluator

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Equals reports whether a and b name the same resources with equal
// quantities (compared by value, so "1" equals "1000m").
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// Add returns a new list holding a+b per resource; neither input changes.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for name, q := range a {
		sum := q.DeepCopy()
		if other, ok := b[name]; ok {
			sum.Add(other)
		}
		out[name] = sum
	}
	for name, q := range b {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// Mask returns a copy of the entries of list whose name is in names.
func Mask(list corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	keep := sets.New(names...)
	out := corev1.ResourceList{}
	for name, q := range list {
		if keep.Has(name) {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// ResourceNames lists the names in list, in no particular order.
func ResourceNames(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		out = append(out, name)
	}
	return out
}

// Contains reports whether item is in items.
func Contains(items []corev1.ResourceName, item corev1.ResourceName) bool {
	return slices.Contains(items, item)
}

// ContainsPrefix reports whether item starts with any of prefixes.
func ContainsPrefix(prefixes []string, item corev1.ResourceName) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(string(item), p) {
			return true
		}
	}
	return false
}

// Intersection returns the distinct names of a that are also in b, sorted.
func Intersection(a, b []corev1.ResourceName) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(a))
	for _, name := range a {
		if Contains(b, name) && !Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Difference returns the distinct names of a that are not in b, sorted.
func Difference(a, b []corev1.ResourceName) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(a))
	for _, name := range a {
		if !Contains(b, name) && !Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
