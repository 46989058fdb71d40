package bootstrap

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
)

var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

// tokenSecret is a valid signing token in kube-system; mutate as needed.
func tokenSecret(id, secret string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem,
			Name:      bootstrapapi.BootstrapTokenSecretPrefix + id,
			UID:       types.UID("uid-" + id),
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:           []byte(id),
			bootstrapapi.BootstrapTokenSecretKey:       []byte(secret),
			bootstrapapi.BootstrapTokenUsageSigningKey: []byte("true"),
		},
	}
}

func withExpiration(s *v1.Secret, value string) *v1.Secret {
	s.Data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(value)
	return s
}

func writes(client *fake.Clientset) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, a)
		}
	}
	return out
}

// recordingQueue remembers AddAfter calls instead of waiting them out.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	after map[string]time.Duration
}

func newRecordingQueue() *recordingQueue {
	return &recordingQueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		after:                      map[string]time.Duration{},
	}
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.after[key] = d
}

func (q *recordingQueue) delays() map[string]time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]time.Duration{}
	for k, v := range q.after {
		out[k] = v
	}
	return out
}
