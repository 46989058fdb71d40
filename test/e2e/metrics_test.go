package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// metricFamilies reads "# TYPE name type" lines of a Prometheus text scrape.
func metricFamilies(body string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// createMetricsWorkload makes one object of each kind the comparison
// exercises and plays kubelet for it: Deployment pods run, Job pods succeed.
func createMetricsWorkload(ctx context.Context, t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	framework.Kubelet{Client: c}.Run(ctx, ns)
	lbl := map[string]string{"app": "web"}
	podSpec := v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}}}}}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().ResourceQuotas(ns).Create(ctx, &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec:       v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("20")}},
	}, metav1.CreateOptions{}))
	must(c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: podSpec},
		},
	}, metav1.CreateOptions{}))
	must(c.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       v1.ServiceSpec{Selector: lbl, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}))
	must(c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: lbl}},
	}, metav1.CreateOptions{}))
	must(c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
		},
	}, metav1.CreateOptions{}))
	jobSpec := batchv1.JobSpec{
		TTLSecondsAfterFinished: ptr.To[int32](3600),
		Template: v1.PodTemplateSpec{Spec: func() v1.PodSpec {
			s := *podSpec.DeepCopy()
			s.RestartPolicy = v1.RestartPolicyNever
			return s
		}()},
	}
	must(c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"}, Spec: jobSpec}, metav1.CreateOptions{}))
	must(c.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec},
		},
	}, metav1.CreateOptions{}))

	// Job pods succeed once running, so the Job and CronJob paths finish.
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		k := framework.Kubelet{Client: c}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
					_, _ = k.MarkSucceeded(ctx, p)
				}
			}
		}
	}()
}

// waitMetricsWorkload waits until the Deployment is available and a Job of
// the CronJob has completed, so every controller involved has synced.
func waitMetricsWorkload(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "Deployment available and a CronJob's Job complete", func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 2 {
			return false, nil
		}
		cj, err := c.BatchV1().CronJobs(ns).Get(ctx, "every-minute", metav1.GetOptions{})
		return err == nil && cj.Status.LastSuccessfulTime != nil, nil
	})
}

// Upstream's binary and ours run in turn on the same bed with every
// controller on and the same workload; every metric family upstream
// exposes must be exposed by ours, with the same type.
func TestMetricFamiliesMatchUpstream(t *testing.T) {
	upstream := upstreamBinary(t)
	cp := framework.Shared(t)
	c := cp.Client(t)
	caCert, caKey := writeCA(t)
	args := []string{"--leader-elect=false",
		"--controllers=*,bootstrap-signer-controller,token-cleaner-controller",
		"--service-account-private-key-file=" + cp.ServiceAccountKeyFile,
		"--root-ca-file=" + caCert,
		"--cluster-signing-cert-file=" + caCert, "--cluster-signing-key-file=" + caKey,
		"--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16",
		"--use-service-account-credentials=false"}

	scrape := func(binary, who string) map[string]string {
		saved := kcmBinary
		kcmBinary = binary
		p := startKCM(t, args...)
		kcmBinary = saved
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ns := framework.CreateNamespace(t, c, "metrics-"+who)
		createMetricsWorkload(ctx, t, c, ns)
		waitMetricsWorkload(t, c, ns)
		code, body := get(t, p.url("/metrics"), cp.Tokens[framework.AdminUser])
		if code != http.StatusOK {
			t.Fatalf("%s /metrics = %d: %s", who, code, tail(body, 2000))
		}
		if _, ok := p.stop(syscall.SIGTERM, 30*time.Second); !ok {
			t.Fatalf("%s did not exit on SIGTERM", who)
		}
		fams := metricFamilies(body)
		if len(fams) == 0 {
			t.Fatalf("%s /metrics has no families: %s", who, tail(body, 2000))
		}
		return fams
	}

	want := scrape(upstream, "upstream")
	got := scrape(kcmBinary, "ours")
	var missing, extra, racy []string
	for name, typ := range want {
		switch g, ok := got[name]; {
		case !ok && appearsOnlyAfterARace(name):
			racy = append(racy, name)
		case !ok:
			missing = append(missing, name)
		case g != typ:
			missing = append(missing, fmt.Sprintf("%s (ours %s, upstream %s)", name, g, typ))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	t.Logf("upstream %d families, ours %d; only ours: %v; only upstream, race-dependent: %v", len(want), len(got), extra, racy)
	if len(missing) > 0 {
		t.Errorf("%d families upstream exposes are missing or differ in ours:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// appearsOnlyAfterARace: a counter vector shows in /metrics only once a
// label value is set, and the stale-sync-skip counters are set only when a
// sync happens to find the cache behind the controller's own write, which
// is timing, not behaviour: either binary may or may not show them in a run.
func appearsOnlyAfterARace(family string) bool {
	return strings.HasSuffix(family, "_stale_sync_skips_total")
}
