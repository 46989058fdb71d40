package job

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// TestUpstreamDiff runs the same Job scenarios under upstream's
// kube-controller-manager binary and under this package's controllers and
// compares what users see (final status, pods, events). Opt in with
// KCM_UPSTREAM_DIFF=1; it needs _output/bin/kube-controller-manager-upstream.
func TestUpstreamDiff(t *testing.T) {
	if os.Getenv("KCM_UPSTREAM_DIFF") == "" {
		t.Skip("set KCM_UPSTREAM_DIFF=1 to compare with the upstream binary")
	}
	cp := framework.Shared(t)
	c := cp.Client(t)

	upstream := runScenarios(t, c, func(t *testing.T) func() { return startUpstream(t, cp) })
	ours := runScenarios(t, c, func(t *testing.T) func() {
		ctx, cancel := context.WithCancel(context.Background())
		runControllersCtx(t, ctx, c)
		return cancel
	})
	for name, u := range upstream {
		if o := ours[name]; o != u {
			t.Errorf("%s differs\nupstream: %s\nours:     %s", name, u, o)
		}
	}
}

func startUpstream(t *testing.T, cp *framework.ControlPlane) func() {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(framework.BinDir(), "kube-controller-manager-upstream"),
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+dir,
		"--leader-elect=false", "--controllers=job-controller,ttl-after-finished-controller", "--v=2")
	logf, _ := os.Create(filepath.Join(dir, "kcm.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

type scenario struct {
	name    string
	job     func() *batchv1.Job
	succeed bool
	cond    batchv1.JobConditionType
	// pre runs before pods are finished; idle leaves pods alone.
	pre  func(t *testing.T, c clientset.Interface, j *batchv1.Job)
	idle bool
}

func runScenarios(t *testing.T, c clientset.Interface, start func(*testing.T) func()) map[string]string {
	stop := start(t)
	defer stop()
	out := map[string]string{}
	for _, sc := range []scenario{
		{"kubectl", func() *batchv1.Job { return kubectlJob("pi") }, true, batchv1.JobComplete, nil, false},
		{"parallel", func() *batchv1.Job {
			j := kubectlJob("par")
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](2)
			return j
		}, true, batchv1.JobComplete, nil, false},
		{"indexed", func() *batchv1.Job {
			j := kubectlJob("idx")
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			return j
		}, true, batchv1.JobComplete, nil, false},
		{"fail", func() *batchv1.Job {
			j := kubectlJob("boom")
			j.Spec.BackoffLimit = ptr.To[int32](0)
			return j
		}, false, batchv1.JobFailed, nil, false},
		{"deadline", func() *batchv1.Job {
			j := kubectlJob("late")
			j.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
			j.Spec.Parallelism = ptr.To[int32](2)
			j.Spec.Completions = ptr.To[int32](4)
			return j
		}, false, batchv1.JobFailed, nil, true},
		{"podfailurepolicy", func() *batchv1.Job {
			j := kubectlJob("pfp")
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
			}}}
			return j
		}, false, batchv1.JobFailed, nil, false},
		{"suspend", func() *batchv1.Job {
			j := kubectlJob("sus")
			j.Spec.Suspend = ptr.To(true)
			return j
		}, true, batchv1.JobComplete, func(t *testing.T, c clientset.Interface, j *batchv1.Job) {
			framework.Eventually(t, timeout, "suspended", func(ctx context.Context) (bool, error) {
				got, err := c.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
				return err == nil && hasCondition(got, batchv1.JobSuspended, ""), err
			})
			if _, err := c.BatchV1().Jobs(j.Namespace).Patch(context.Background(), j.Name, "application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"perindex", func() *batchv1.Job {
			j := kubectlJob("bpi")
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
			return j
		}, false, batchv1.JobFailed, nil, false},
		{"retry", func() *batchv1.Job {
			j := kubectlJob("retry")
			j.Spec.BackoffLimit = ptr.To[int32](1)
			return j
		}, false, batchv1.JobFailed, nil, false},
	} {
		ns := framework.CreateNamespace(t, c, "diff-"+sc.name)
		j, err := c.BatchV1().Jobs(ns).Create(context.Background(), sc.job(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.pre != nil {
			sc.pre(t, c, j)
		}
		var done *batchv1.Job
		if sc.idle {
			framework.Eventually(t, timeout, "finished", func(ctx context.Context) (bool, error) {
				done, err = c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
				return err == nil && hasCondition(done, sc.cond, ""), err
			})
		} else {
			done = finishPods(t, c, j, sc.succeed, sc.cond)
		}
		waitNoFinalizers(t, c, j)
		time.Sleep(2 * time.Second) // let events flush
		out[sc.name+"/status"] = normStatus(done)
		pods, _ := podsOf(context.Background(), c, j)
		out[sc.name+"/pods"] = normPods(pods)
		out[sc.name+"/events"] = normEvents(t, c, ns)
	}
	return out
}

var podName = regexp.MustCompile(`\b([a-z]+(-[0-9])?)-[a-z0-9]{5}\b`)

func normStatus(j *batchv1.Job) string {
	s := j.Status.DeepCopy()
	s.StartTime, s.CompletionTime = nil, nil
	for i := range s.Conditions {
		s.Conditions[i].LastProbeTime = metav1.Time{}
		s.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	b, _ := json.Marshal(s)
	return podName.ReplaceAllString(string(b), "$1-XXXXX")
}

func normPods(pods []v1.Pod) string {
	var out []string
	for _, p := range pods {
		var keys []string
		for k := range p.Labels {
			keys = append(keys, k)
		}
		for k := range p.Annotations {
			keys = append(keys, "a:"+k+"="+p.Annotations[k])
		}
		sort.Strings(keys)
		env, _ := json.Marshal(p.Spec.Containers[0].Env)
		out = append(out, fmt.Sprintf("gn=%s host=%s fin=%v keys=%v env=%s", p.GenerateName, p.Spec.Hostname, p.Finalizers, keys, env))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func normEvents(t *testing.T, c clientset.Interface, ns string) string {
	l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.Kind != "Job" {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s/%s/%s x%d", e.Source.Component, e.Type, e.Reason, podName.ReplaceAllString(e.Message, "$1-XXXXX"), e.Count))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
