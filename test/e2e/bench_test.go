package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// BenchmarkDeploymentConvergence measures the API writes a controller
// manager makes to bring a 10-replica Deployment to 10 available pods:
// Deployment status writes, ReplicaSet writes (spec, annotations and
// status) and the wall time. Compare binaries with KCM_BINARY, e.g. upstream's:
//
//	KCM_BINARY=_output/bin/kube-controller-manager-upstream go test ./test/e2e -run '^$' -bench DeploymentConvergence -benchtime 3x
func BenchmarkDeploymentConvergence(b *testing.B) {
	cp := framework.Shared(b)
	c := cp.Client(b)
	p := startKCMB(b, "--leader-elect=false", "--controllers=deployment-controller,replicaset-controller")
	_ = p
	var dWrites, rsWrites int
	// KCM_BENCH_TRACE=1 logs every write seen, to compare binaries.
	trace := os.Getenv("KCM_BENCH_TRACE") != ""
	var total time.Duration
	for i := 0; i < b.N; i++ {
		ns := framework.CreateNamespace(b, c, fmt.Sprintf("bench-%d", i))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		framework.Kubelet{Client: c}.Run(ctx, ns)
		dw, err := c.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rw, err := c.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		lbl := map[string]string{"app": "bench"}
		start := time.Now()
		_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](10),
				Selector: &metav1.LabelSelector{MatchLabels: lbl},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: lbl},
					Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// Converged: status reports 10 available for the current generation.
		// Then wait a little for trailing writes, which count too.
		converged := false
		settle := time.After(2 * time.Minute)
		var settleStarted bool
		for done := false; !done; {
			select {
			case ev := <-dw.ResultChan():
				if ev.Type != watch.Modified {
					continue
				}
				dWrites++
				d := ev.Object.(*appsv1.Deployment)
				if trace {
					b.Logf("deployment rv=%s gen=%d status=%+v", d.ResourceVersion, d.Generation, briefStatus(d))
				}
				if !converged && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 10 && d.Status.UpdatedReplicas == 10 {
					converged = true
					total += time.Since(start)
				}
			case ev := <-rw.ResultChan():
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					rsWrites++
					if trace {
						rs := ev.Object.(*appsv1.ReplicaSet)
						b.Logf("replicaset %s rv=%s spec=%d status=%+v", ev.Type, rs.ResourceVersion, *rs.Spec.Replicas, rs.Status)
					}
				}
			case <-settle:
				done = true
			case <-ctx.Done():
				b.Fatal("timed out")
			}
			if converged && !settleStarted {
				settleStarted = true
				settle = time.After(3 * time.Second)
			}
		}
		dw.Stop()
		rw.Stop()
		cancel()
		if !converged {
			b.Fatal("deployment did not converge")
		}
	}
	b.ReportMetric(float64(dWrites)/float64(b.N), "deployment-writes/op")
	b.ReportMetric(float64(rsWrites)/float64(b.N), "replicaset-writes/op")
	b.ReportMetric(total.Seconds()/float64(b.N), "converge-s/op")
}

// startKCMB is startKCM for benchmarks.
func startKCMB(b *testing.B, extra ...string) *kcmProcess {
	b.Helper()
	return startKCMTB(b, extra...)
}

func briefStatus(d *appsv1.Deployment) string {
	s := d.Status
	conds := ""
	for _, c := range s.Conditions {
		conds += fmt.Sprintf(" %s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return fmt.Sprintf("obs=%d r=%d upd=%d ready=%d avail=%d unavail=%d term=%v%s", s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas, s.TerminatingReplicas, conds)
}
