package testutil

import (
	"strings"

	clienttesting "k8s.io/client-go/testing"
)

// ActionLister is what every client-go fake (kubernetes, metadata, dynamic)
// offers: the actions it has seen so far.
type ActionLister interface {
	Actions() []clienttesting.Action
}

// isRead tells the actions that change nothing; tests assert on the writes
// a controller makes, and how often it reads is an implementation detail.
func isRead(a clienttesting.Action) bool {
	switch a.GetVerb() {
	case "get", "list", "watch":
		return true
	}
	return false
}

// WriteActions keeps the actions that are not get, list or watch.
func WriteActions(actions []clienttesting.Action) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range actions {
		if !isRead(a) {
			out = append(out, a)
		}
	}
	return out
}

// AllWrites lists every create, update, patch and delete (and any other
// non-read verb) c has seen, in order.
func AllWrites(c ActionLister) []clienttesting.Action {
	return WriteActions(c.Actions())
}

// Writes lists the writes c has seen with the given verb to the given
// resource. An empty verb or resource matches any; a resource with a slash
// ("deployments/status") also names the subresource, one without it
// matches the resource and all its subresources.
func Writes(c ActionLister, verb, resource string) []clienttesting.Action {
	res, sub, hasSub := strings.Cut(resource, "/")
	var out []clienttesting.Action
	for _, a := range AllWrites(c) {
		if verb != "" && a.GetVerb() != verb {
			continue
		}
		if res != "" && a.GetResource().Resource != res {
			continue
		}
		if hasSub && a.GetSubresource() != sub {
			continue
		}
		out = append(out, a)
	}
	return out
}

// Describe names each action as "verb resource[/subresource]", the form
// failure messages and table-driven expectations compare best.
func Describe(actions []clienttesting.Action) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			s += "/" + sub
		}
		out = append(out, s)
	}
	return out
}
