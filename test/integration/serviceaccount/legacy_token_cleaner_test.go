package serviceaccount

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount/legacytokencleaner"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// Unused auto-generated tokens are first labelled invalid, then deleted once
// invalid for a clean-up period; a token a pod mounts is left alone, as is
// one its ServiceAccount does not list.
func TestLegacyTokenCleaner(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ctx := context.Background()
	// The apiserver records when it began tracking token use; pretend it
	// was long ago, so that "unused for a period" can be known.
	framework.Eventually(t, waitTimeout, "the tracking ConfigMap to be backdated", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Patch(ctx, legacytokencleaner.TrackingConfigMapName,
			types.MergePatchType, []byte(`{"data":{"since":"2020-01-01"}}`), metav1.PatchOptions{})
		return err == nil, nil
	})

	ns := framework.CreateNamespace(t, c, "legacy-tokens")
	names := []string{"unused", "long-invalid", "mounted"}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}
	for _, n := range names {
		sa.Secrets = append(sa.Secrets, v1.ObjectReference{Name: n})
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(name string, labels map[string]string) {
		t.Helper()
		_, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{v1.ServiceAccountNameKey: "robot"}},
			Type:       v1.SecretTypeServiceAccountToken,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	token("unused", nil)
	token("long-invalid", map[string]string{legacytokencleaner.InvalidSinceLabelKey: "2020-01-02"})
	token("mounted", nil)
	token("unlisted", nil)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		ServiceAccountName: "robot",
		Containers:         []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		Volumes:            []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "mounted"}}}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every token must be older than the clean-up period.
	time.Sleep(2 * time.Second)

	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)
	cleaner, err := legacytokencleaner.NewController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(),
		factory.Core().V1().Pods(), c, clock.RealClock{},
		legacytokencleaner.LegacySATokenCleanerOptions{CleanUpPeriod: time.Second, SyncInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(runCtx.Done())
	done := make(chan struct{})
	go func() { cleaner.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})

	today := time.Now().UTC().Format("2006-01-02")
	framework.Eventually(t, waitTimeout, "the unused token to be marked invalid today", func(ctx context.Context) (bool, error) {
		s, err := c.CoreV1().Secrets(ns).Get(ctx, "unused", metav1.GetOptions{})
		return err == nil && s.Labels[legacytokencleaner.InvalidSinceLabelKey] == today, err
	})
	framework.Eventually(t, waitTimeout, "the long-invalid token to be deleted", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Secrets(ns).Get(ctx, "long-invalid", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, name := range []string{"mounted", "unlisted"} {
		s, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, marked := s.Labels[legacytokencleaner.InvalidSinceLabelKey]; marked {
			t.Errorf("%s was marked invalid: %v", name, s.Labels)
		}
	}
}
