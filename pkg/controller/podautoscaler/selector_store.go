package podautoscaler

import (
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// hpaKey names an HPA.
type hpaKey struct {
	Name      string
	Namespace string
}

// parseHPAKey splits a namespace/name queue key.
func parseHPAKey(s string) hpaKey {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return hpaKey{Namespace: ns, Name: name}
	}
	return hpaKey{Name: s}
}

func (k hpaKey) String() string {
	return fmt.Sprintf("%v/%v", k.Namespace, k.Name)
}

// selectorStore remembers the pod selector of every known HPA, per
// namespace, so an HPA whose pods another HPA also selects can be refused:
// two autoscalers would fight over the same pods.
type selectorStore struct {
	mu         sync.RWMutex
	namespaces map[string]map[hpaKey]labels.Selector
}

func newSelectorStore() *selectorStore {
	return &selectorStore{namespaces: map[string]map[hpaKey]labels.Selector{}}
}

// putIfAbsent registers key with selector unless it is known already, and
// reports whether it was added.
func (s *selectorStore) putIfAbsent(key hpaKey, selector labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[key.Namespace]
	if ns == nil {
		ns = map[hpaKey]labels.Selector{}
		s.namespaces[key.Namespace] = ns
	}
	if _, ok := ns[key]; ok {
		return false
	}
	ns[key] = selector
	return true
}

// putIfPresent replaces the selector of a known key, and reports whether
// key was known (an HPA deleted meanwhile is not brought back).
func (s *selectorStore) putIfPresent(key hpaKey, selector labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[key.Namespace]
	if _, ok := ns[key]; !ok {
		return false
	}
	ns[key] = selector
	return true
}

func (s *selectorStore) delete(key hpaKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[key.Namespace]
	delete(ns, key)
	if len(ns) == 0 {
		delete(s.namespaces, key.Namespace)
	}
}

// hpasMatchingPods returns the HPAs of namespace selecting at least one of
// pods, stopping once limit are found (no limit when limit <= 0).
func (s *selectorStore) hpasMatchingPods(namespace string, pods []*v1.Pod, limit int) []hpaKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.namespaces[namespace]
	if len(ns) == 0 {
		return nil
	}
	// Pods of one workload usually share their labels: match each set once.
	sets := map[string]labels.Set{}
	for _, p := range pods {
		set := labels.Set(p.Labels)
		sets[set.String()] = set
	}
	var found []hpaKey
	seen := map[hpaKey]bool{}
	for _, set := range sets {
		for key, sel := range ns {
			if seen[key] || !sel.Matches(set) {
				continue
			}
			seen[key] = true
			found = append(found, key)
			if limit > 0 && len(found) >= limit {
				return found
			}
		}
	}
	return found
}
