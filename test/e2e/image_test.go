package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// manifestPath is the static pod this test runs as a kubelet would.
const manifestPath = "cluster/manifests/kube-controller-manager.yaml"

func loadManifest(t *testing.T) *v1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), manifestPath))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("decoding %s: %v", manifestPath, err)
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		t.Fatalf("%s holds a %T, want a Pod", manifestPath, obj)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: want one container, got %d", manifestPath, len(pod.Spec.Containers))
	}
	return pod
}

// kubeadmFiles writes what kubeadm puts under /etc/kubernetes for the
// controller manager, pointing at the test's control plane, and returns
// the host path to use for each of the manifest's hostPath volumes.
func kubeadmFiles(t *testing.T, cp *framework.ControlPlane) map[string]string {
	t.Helper()
	root := t.TempDir()
	pki := filepath.Join(root, "pki")
	certs := filepath.Join(root, "ssl-certs")
	for _, d := range []string{pki, certs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caCrt, caKey := writeCA(t)
	copyFile(caCrt, filepath.Join(pki, "ca.crt"))
	copyFile(caKey, filepath.Join(pki, "ca.key"))
	frontProxyCA, _ := writeCA(t)
	copyFile(frontProxyCA, filepath.Join(pki, "front-proxy-ca.crt"))
	copyFile(cp.ServiceAccountKeyFile, filepath.Join(pki, "sa.key"))
	conf := filepath.Join(root, "controller-manager.conf")
	if err := framework.WriteKubeconfig(conf, cp.URL, cp.Tokens[framework.AdminUser]); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"/etc/ssl/certs":                          certs,
		"/etc/kubernetes/pki":                     pki,
		"/etc/kubernetes/controller-manager.conf": conf,
	}
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// probe performs an httpGet probe as the kubelet does.
func probe(p *v1.Probe, port int) error {
	g := p.HTTPGet
	client := &http.Client{
		Timeout:   time.Duration(p.TimeoutSeconds) * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // kubelet probes skip verification too
	}
	url := fmt.Sprintf("%s://%s:%d%s", strings.ToLower(string(g.Scheme)), g.Host, port, g.Path)
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// TestImageWithManifest runs the image as the kubelet would run
// cluster/manifests/kube-controller-manager.yaml on a kubeadm node: its
// command, host network and hostPath mounts (the /etc/kubernetes files
// written by the test for its own control plane), then its probes, the
// Lease and a Deployment made available. Only the port moves: the
// manifest's 10257 may be taken on a shared machine, so --secure-port is
// appended and the probes follow it.
func TestImageWithManifest(t *testing.T) {
	image := os.Getenv("KCM_IMAGE")
	if image == "" {
		t.Skip("KCM_IMAGE is not set: `make test-e2e` builds the image (make image) and sets it")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("KCM_IMAGE=%s is set but docker is not installed: %v", image, err)
	}
	cp := framework.Shared(t)
	c := cp.Client(t)
	pod := loadManifest(t)
	ctr := pod.Spec.Containers[0]
	if !pod.Spec.HostNetwork {
		t.Fatalf("%s: want hostNetwork", manifestPath)
	}
	if ctr.StartupProbe == nil || ctr.LivenessProbe == nil || ctr.StartupProbe.HTTPGet == nil || ctr.LivenessProbe.HTTPGet == nil {
		t.Fatalf("%s: want httpGet startup and liveness probes", manifestPath)
	}
	if ctr.StartupProbe.HTTPGet.Port.IntValue() != 10257 || ctr.LivenessProbe.HTTPGet.Port.IntValue() != 10257 {
		t.Fatalf("%s: probes should use the default --secure-port 10257", manifestPath)
	}

	hostPaths := kubeadmFiles(t, cp)
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			t.Fatalf("%s: volume %s is not a hostPath", manifestPath, v.Name)
		}
		p, ok := hostPaths[v.HostPath.Path]
		if !ok {
			t.Fatalf("%s: volume %s mounts %s, which the test does not provide", manifestPath, v.Name, v.HostPath.Path)
		}
		volumes[v.Name] = p
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}

	name := fmt.Sprintf("kcm-image-e2e-%d", time.Now().UnixNano())
	args := []string{"run", "-d", "--name", name, "--network", "host", "--entrypoint", ctr.Command[0]}
	for _, m := range ctr.VolumeMounts {
		opt := ""
		if m.ReadOnly {
			opt = ":ro"
		}
		args = append(args, "-v", volumes[m.Name]+":"+m.MountPath+opt)
	}
	args = append(args, image)
	args = append(args, ctr.Command[1:]...)
	args = append(args, ctr.Args...)
	args = append(args, "--secure-port="+strconv.Itoa(port))
	docker(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", "--tail", "200", name).CombinedOutput()
			t.Logf("container logs:\n%s", out)
		}
		_ = exec.Command("docker", "rm", "-f", name).Run()
	})

	// Startup probe: healthy within what the manifest allows.
	sp := ctr.StartupProbe
	startupWindow := time.Duration(sp.InitialDelaySeconds+sp.FailureThreshold*sp.PeriodSeconds) * time.Second
	framework.Eventually(t, startupWindow, "the startup probe to pass", func(context.Context) (bool, error) {
		if state := docker(t, "inspect", "-f", "{{.State.Status}}", name); state != "running" {
			return false, fmt.Errorf("container is %s", state)
		}
		return probe(sp, port) == nil, nil
	})

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the container to hold the kube-controller-manager Lease", func(ctx context.Context) (bool, error) {
		l, err := getLease(ctx, c, "kube-controller-manager")
		if err != nil {
			return false, nil
		}
		return strings.HasPrefix(holder(l), host+"_"), nil
	})

	ns := framework.CreateNamespace(t, c, "image")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	framework.Kubelet{Client: c}.Run(ctx, ns)
	labels := map[string]string{"app": "web"}
	_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the Deployment to become available", func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == v1.ConditionTrue {
				return d.Status.AvailableReplicas == 3, nil
			}
		}
		return false, nil
	})

	if err := probe(ctr.LivenessProbe, port); err != nil {
		t.Fatalf("liveness probe: %v", err)
	}

	// Deleting the static pod: SIGTERM, a clean exit and the Lease let go.
	docker(t, "stop", "-t", "60", name)
	if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", name); code != "0" {
		t.Fatalf("container exited %s on SIGTERM, want 0", code)
	}
	l, err := getLease(context.Background(), c, "kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	if h := holder(l); h != "" {
		t.Fatalf("Lease still held by %q after the container stopped", h)
	}
}
