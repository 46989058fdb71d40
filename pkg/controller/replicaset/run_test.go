package replicaset

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// TestRunConverges drives the controller through real (fake-backed)
// informers: scale up, then scale down.
func TestRunConverges(t *testing.T) {
	f := testutil.NewFixture(t)
	client, ctx := f.Client, f.Ctx
	testutil.NamePods(client)
	rsc := NewController(ctx, f.Informers.Apps().V1().ReplicaSets(), f.Informers.Core().V1().Pods(), client, BurstReplicas, v137Features)
	f.Run(func(ctx context.Context) { rsc.Run(ctx, 2) })

	rs := newRS("web", 3)
	if _, err := client.AppsV1().ReplicaSets("ns").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods := func(want int) {
		t.Helper()
		testutil.WaitUntil(t, fmt.Sprintf("%d pods", want), func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			live := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			if live != want {
				return false, nil
			}
			got, err := client.AppsV1().ReplicaSets("ns").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && got.Status.Replicas == int32(want), err
		})
	}
	waitPods(3)

	cur, _ := client.AppsV1().ReplicaSets("ns").Get(ctx, "web", metav1.GetOptions{})
	cur.Spec.Replicas = func(i int32) *int32 { return &i }(1)
	cur.Generation = 2
	if _, err := client.AppsV1().ReplicaSets("ns").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(1)
}
