package legacytokencleaner

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const period = 30 * 24 * time.Hour

var (
	// testNow - period is 2030-05-16T12:00Z, so tokens created or used
	// on 2030-05-16 or later are kept.
	testNow = time.Date(2030, 6, 15, 12, 0, 0, 0, time.UTC)
	longAgo = metav1.NewTime(time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

func trackingConfigMap(since string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: TrackingConfigMapName},
		Data:       map[string]string{TrackingConfigMapDataKey: since},
	}
}

func serviceAccount(secrets ...string) *v1.ServiceAccount {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sa", UID: "sa-uid"}}
	for _, s := range secrets {
		sa.Secrets = append(sa.Secrets, v1.ObjectReference{Name: s})
	}
	return sa
}

// tokenSecret is an old, unlabelled token of serviceAccount(), which
// references it.
func tokenSecret(labels map[string]string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "default",
			Name:              "sa-token",
			UID:               "secret-uid",
			ResourceVersion:   "42",
			CreationTimestamp: longAgo,
			Labels:            labels,
			Annotations:       map[string]string{v1.ServiceAccountNameKey: "sa", v1.ServiceAccountUIDKey: "sa-uid"},
		},
		Type: v1.SecretTypeServiceAccountToken,
	}
}

func podUsing(namespace string, spec v1.PodSpec) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "pod"}, Spec: spec}
}

// newCleaner puts objs in the fake API and the caches (the tracking
// ConfigMap is only read from the API).
func newCleaner(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	tc, err := NewController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), factory.Core().V1().Pods(),
		client, testingclock.NewFakePassiveClock(testNow), LegacySATokenCleanerOptions{CleanUpPeriod: period, SyncInterval: DefaultCleanerSyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Secret:
			err = factory.Core().V1().Secrets().Informer().GetIndexer().Add(o)
		case *v1.ServiceAccount:
			err = factory.Core().V1().ServiceAccounts().Informer().GetIndexer().Add(o)
		case *v1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return tc, client
}

type outcome int

const (
	kept outcome = iota
	marked
	deleted
)

func (o outcome) String() string { return [...]string{"kept", "marked invalid", "deleted"}[o] }

// checkOutcome asserts the single write (or none) the pass made.
func checkOutcome(t *testing.T, client *fake.Clientset, want outcome) {
	t.Helper()
	w := testutil.AllWrites(client)
	switch want {
	case kept:
		if len(w) != 0 {
			t.Fatalf("expected no writes, got %v", w)
		}
	case marked:
		if len(w) != 1 {
			t.Fatalf("expected one patch, got %v", w)
		}
		p, ok := w[0].(clienttesting.PatchAction)
		if !ok || p.GetName() != "sa-token" || p.GetNamespace() != "default" || p.GetPatchType() != types.MergePatchType {
			t.Fatalf("expected a merge patch of default/sa-token, got %v", w[0])
		}
		const want = `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"sa-token","namespace":"default","uid":"secret-uid","labels":{"kubernetes.io/legacy-token-invalid-since":"2030-06-15"}}}`
		if string(p.GetPatch()) != want {
			t.Fatalf("patch %s\nwant  %s", p.GetPatch(), want)
		}
	case deleted:
		if len(w) != 1 {
			t.Fatalf("expected one delete, got %v", w)
		}
		d, ok := w[0].(clienttesting.DeleteActionImpl)
		if !ok || d.GetName() != "sa-token" || d.GetNamespace() != "default" {
			t.Fatalf("expected a delete of default/sa-token, got %v", w[0])
		}
		if p := d.DeleteOptions.Preconditions; p == nil || p.ResourceVersion == nil || *p.ResourceVersion != "42" || p.UID != nil {
			t.Fatalf("preconditions %+v, want resourceVersion 42", p)
		}
	}
}

func TestEvaluate(t *testing.T) {
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	withSecret := func(mutate func(*v1.Secret)) *v1.Secret {
		s := tokenSecret(nil)
		mutate(s)
		return s
	}
	cases := []struct {
		name     string
		tracking *v1.ConfigMap
		secret   *v1.Secret
		sa       *v1.ServiceAccount
		pods     []*v1.Pod
		want     outcome
	}{
		{name: "unused token is marked invalid", secret: tokenSecret(nil), want: marked},
		{name: "used before the cutoff day", secret: tokenSecret(l(LastUsedLabelKey, "2030-05-15")), want: marked},
		{name: "used on the cutoff day", secret: tokenSecret(l(LastUsedLabelKey, "2030-05-16")), want: kept},
		{name: "used recently", secret: tokenSecret(l(LastUsedLabelKey, "2030-06-14")), want: kept},
		{name: "unparseable last used", secret: tokenSecret(l(LastUsedLabelKey, "June")), want: kept},
		{name: "invalid since before the cutoff day is deleted", secret: tokenSecret(l(InvalidSinceLabelKey, "2030-05-15")), want: deleted},
		{name: "invalid since the cutoff day", secret: tokenSecret(l(InvalidSinceLabelKey, "2030-05-16")), want: kept},
		{name: "unparseable invalid since is marked again", secret: tokenSecret(l(InvalidSinceLabelKey, "later")), want: marked},
		{name: "old use and old invalid since", secret: tokenSecret(l(LastUsedLabelKey, "2029-01-01", InvalidSinceLabelKey, "2030-01-01")), want: deleted},
		{name: "created just before the cutoff", secret: withSecret(func(s *v1.Secret) {
			s.CreationTimestamp = metav1.NewTime(testNow.Add(-period - time.Second))
		}), want: marked},
		{name: "created at the cutoff", secret: withSecret(func(s *v1.Secret) {
			s.CreationTimestamp = metav1.NewTime(testNow.Add(-period))
		}), want: kept},
		{name: "being deleted", secret: withSecret(func(s *v1.Secret) {
			s.DeletionTimestamp = &longAgo
		}), want: kept},
		{name: "not a token", secret: withSecret(func(s *v1.Secret) { s.Type = v1.SecretTypeOpaque }), want: kept},
		{name: "no service account annotation", secret: withSecret(func(s *v1.Secret) {
			delete(s.Annotations, v1.ServiceAccountNameKey)
		}), want: kept},
		{name: "service account UID differs", secret: withSecret(func(s *v1.Secret) {
			s.Annotations[v1.ServiceAccountUIDKey] = "other"
		}), want: kept},
		{name: "no service account UID to compare", secret: withSecret(func(s *v1.Secret) {
			delete(s.Annotations, v1.ServiceAccountUIDKey)
		}), want: marked},
		{name: "service account gone", secret: tokenSecret(nil), sa: &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}}, want: kept},
		{name: "not listed by its service account", secret: tokenSecret(nil), sa: serviceAccount("something-else"), want: kept},
		{name: "mounted as a volume", secret: tokenSecret(nil), pods: []*v1.Pod{podUsing("default", v1.PodSpec{
			Volumes: []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sa-token"}}}},
		})}, want: kept},
		{name: "used in an env var", secret: tokenSecret(l(InvalidSinceLabelKey, "2030-01-01")), pods: []*v1.Pod{podUsing("default", v1.PodSpec{
			Containers: []v1.Container{{Env: []v1.EnvVar{{Name: "T", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "sa-token"}, Key: "token"}}}}}},
		})}, want: kept},
		{name: "mounted by a pod in another namespace only", secret: tokenSecret(nil), pods: []*v1.Pod{podUsing("other", v1.PodSpec{
			Volumes: []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sa-token"}}}},
		})}, want: marked},
		{name: "pods using other secrets", secret: tokenSecret(nil), pods: []*v1.Pod{podUsing("default", v1.PodSpec{
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "registry"}},
		})}, want: marked},
		{name: "tracking began too recently", tracking: trackingConfigMap("2030-05-16"), secret: tokenSecret(nil), want: kept},
		{name: "tracking began just long enough ago", tracking: trackingConfigMap("2030-05-15"), secret: tokenSecret(nil), want: marked},
		{name: "tracking date unparseable", tracking: trackingConfigMap("soon"), secret: tokenSecret(nil), want: kept},
		{name: "tracking ConfigMap without a date", tracking: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: TrackingConfigMapName}}, secret: tokenSecret(nil), want: kept},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tracking, sa := tc.tracking, tc.sa
			if tracking == nil {
				tracking = trackingConfigMap("2029-01-01")
			}
			if sa == nil {
				sa = serviceAccount("sa-token")
			}
			objs := []runtime.Object{tracking, sa, tc.secret}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			c, client := newCleaner(t, objs...)
			c.evaluateSATokens(testCtx(t))
			checkOutcome(t, client, tc.want)
		})
	}
}

func TestEvaluateWithoutTrackingConfigMap(t *testing.T) {
	c, client := newCleaner(t, serviceAccount("sa-token"), tokenSecret(nil))
	c.evaluateSATokens(testCtx(t))
	checkOutcome(t, client, kept)
}

// TestEvaluateContinuesAfterFailures: a failing write is logged and the
// rest of the pass goes on.
func TestEvaluateContinuesAfterFailures(t *testing.T) {
	first := tokenSecret(nil)
	first.Name = "a-token"
	second := tokenSecret(nil)
	second.Name = "b-token"
	c, client := newCleaner(t, trackingConfigMap("2029-01-01"), serviceAccount("a-token", "b-token"), first, second)
	client.PrependReactor("patch", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchAction).GetName() == "a-token" {
			return true, nil, errors.New("boom")
		}
		return false, nil, nil
	})
	c.evaluateSATokens(testCtx(t))
	if w := testutil.AllWrites(client); len(w) != 2 {
		t.Fatalf("expected two patches, got %v", w)
	}
	got, err := client.CoreV1().Secrets("default").Get(testCtx(t), "b-token", metav1.GetOptions{})
	if err != nil || got.Labels[InvalidSinceLabelKey] != "2030-06-15" {
		t.Fatalf("b-token labels %v, %v", got.Labels, err)
	}
}

func TestNewLegacySATokenCleanerValidation(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	for _, opts := range []LegacySATokenCleanerOptions{
		{CleanUpPeriod: 0, SyncInterval: time.Hour},
		{CleanUpPeriod: -time.Hour, SyncInterval: time.Hour},
		{CleanUpPeriod: time.Hour, SyncInterval: 0},
	} {
		_, err := NewController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), factory.Core().V1().Pods(),
			fake.NewClientset(), testingclock.NewFakePassiveClock(testNow), opts)
		if err == nil {
			t.Errorf("options %+v accepted", opts)
		}
	}
}

// TestRun: the first pass happens as soon as the caches are synced.
func TestRun(t *testing.T) {
	client := fake.NewClientset(trackingConfigMap("2029-01-01"), serviceAccount("sa-token"), tokenSecret(nil))
	factory := informers.NewSharedInformerFactory(client, 0)
	tc, err := NewController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), factory.Core().V1().Pods(),
		client, testingclock.NewFakePassiveClock(testNow), LegacySATokenCleanerOptions{CleanUpPeriod: period, SyncInterval: DefaultCleanerSyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); tc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	testutil.WaitUntil(t, "token was not marked invalid", func(ctx context.Context) (bool, error) {
		s, err := client.CoreV1().Secrets("default").Get(ctx, "sa-token", metav1.GetOptions{})
		return err == nil && s.Labels[InvalidSinceLabelKey] == "2030-06-15", nil
	})
}
