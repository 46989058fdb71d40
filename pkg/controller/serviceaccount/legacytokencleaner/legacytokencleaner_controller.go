// Package legacytokencleaner implements the
// legacy-serviceaccount-token-cleaner-controller. Service account token
// Secrets that the old token controller generated automatically never
// expire. Once the API server has tracked their use for long enough, this
// controller first marks the unused ones invalid (the API server then
// rejects them) and, if they stay unused for a whole clean-up period
// more, deletes them.
package legacytokencleaner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// DefaultCleanerSyncInterval is how often the controller manager has
	// every token evaluated.
	DefaultCleanerSyncInterval = 24 * time.Hour

	// LastUsedLabelKey is the day (dateFormat) the API server last
	// accepted the token, set by the API server.
	LastUsedLabelKey = "kubernetes.io/legacy-token-last-used"
	// InvalidSinceLabelKey is the day this controller marked the token
	// invalid; the API server refuses tokens carrying it.
	InvalidSinceLabelKey = "kubernetes.io/legacy-token-invalid-since"

	// TrackingConfigMapName, in kube-system, records under
	// TrackingConfigMapDataKey the day the API server started setting
	// LastUsedLabelKey. Before that a missing label means nothing.
	TrackingConfigMapName    = "kube-apiserver-legacy-service-account-token-tracking"
	TrackingConfigMapDataKey = "since"

	// dateFormat is the format of all three dates. Values in this format
	// compare correctly as strings.
	dateFormat = "2006-01-02"
)

// LegacySATokenCleanerOptions configures a Controller.
type LegacySATokenCleanerOptions struct {
	// CleanUpPeriod is how long a token must go unused before it is marked
	// invalid, and then how long it stays invalid before it is deleted
	// (--legacy-service-account-token-clean-up-period).
	CleanUpPeriod time.Duration
	// SyncInterval is how often all tokens are evaluated.
	SyncInterval time.Duration
}

// Controller marks and then deletes unused auto-generated
// service account token Secrets.
type Controller struct {
	client        clientset.Interface
	clock         clock.PassiveClock
	cleanUpPeriod time.Duration
	syncInterval  time.Duration

	saLister     corelisters.ServiceAccountLister
	saSynced     cache.InformerSynced
	secretLister corelisters.SecretLister
	secretSynced cache.InformerSynced
	podLister    corelisters.PodLister
	podSynced    cache.InformerSynced
}

// NewController wires the cleaner to the shared informers. Both
// periods must be positive.
func NewController(saInformer coreinformers.ServiceAccountInformer, secretInformer coreinformers.SecretInformer, podInformer coreinformers.PodInformer, client clientset.Interface, cl clock.PassiveClock, options LegacySATokenCleanerOptions) (*Controller, error) {
	if options.CleanUpPeriod <= 0 {
		return nil, fmt.Errorf("invalid CleanUpPeriod: %v", options.CleanUpPeriod)
	}
	if options.SyncInterval <= 0 {
		return nil, fmt.Errorf("invalid SyncInterval: %v", options.SyncInterval)
	}
	return &Controller{
		client:        client,
		clock:         cl,
		cleanUpPeriod: options.CleanUpPeriod,
		syncInterval:  options.SyncInterval,
		saLister:      saInformer.Lister(),
		saSynced:      saInformer.Informer().HasSynced,
		secretLister:  secretInformer.Lister(),
		secretSynced:  secretInformer.Informer().HasSynced,
		podLister:     podInformer.Lister(),
		podSynced:     podInformer.Informer().HasSynced,
	}, nil
}

// Run evaluates every token once the caches are synced, then every
// SyncInterval, until ctx is cancelled.
func (tc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting legacy service account token cleaner controller")
	defer logger.Info("Shutting down legacy service account token cleaner controller")

	if !controller.WaitForCacheSync(ctx, "legacy-service-account-token-cleaner", tc.saSynced, tc.secretSynced, tc.podSynced) {
		return
	}
	wait.UntilWithContext(ctx, tc.evaluateSATokens, tc.syncInterval)
}

// evaluateSATokens makes one pass over all Secrets. Problems with one
// Secret are logged and do not stop the pass; the next pass retries.
func (tc *Controller) evaluateSATokens(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := tc.clock.Now().UTC()
	trackedSince, err := tc.latestPossibleTrackedSince(ctx)
	if err != nil {
		logger.Error(err, "Getting lastest possible tracked_since time")
		return
	}
	// Until tracking has run for a whole period, "not used for a period"
	// cannot be known of any token.
	if now.Before(trackedSince.Add(tc.cleanUpPeriod)) {
		return
	}
	cutoff := now.Add(-tc.cleanUpPeriod)
	cutoffDate := cutoff.Format(dateFormat)

	secrets, err := tc.secretLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Getting cached secret list")
		return
	}
	mountedByNamespace := map[string]sets.Set[string]{}
	for _, secret := range secrets {
		tc.evaluate(ctx, secret, now, cutoff, cutoffDate, mountedByNamespace)
	}
}

// evaluate marks or deletes one Secret if it is an auto-generated token,
// created and unused before cutoff, and mounted by no pod.
func (tc *Controller) evaluate(ctx context.Context, secret *v1.Secret, now, cutoff time.Time, cutoffDate string, mountedByNamespace map[string]sets.Set[string]) {
	logger := klog.FromContext(ctx).WithValues("secret", klog.KObj(secret))
	if secret.Type != v1.SecretTypeServiceAccountToken || secret.DeletionTimestamp != nil {
		return
	}
	if !secret.CreationTimestamp.Time.Before(cutoff) {
		return
	}
	// No last-used label: not used since tracking began.
	lastUsed, hasLastUsed := secret.Labels[LastUsedLabelKey]
	if hasLastUsed {
		if _, err := time.Parse(dateFormat, lastUsed); err != nil {
			logger.Error(err, "Parsing lastUsed time")
			return
		}
		if lastUsed >= cutoffDate {
			return
		}
	}

	sa, err := tc.serviceAccountOf(secret)
	if err != nil {
		logger.Error(err, "Getting service account")
		return
	}
	// Only a Secret its ServiceAccount lists in .secrets is known to be
	// auto-generated; a hand-made token Secret is left alone.
	if sa == nil || !referencesSecret(sa, secret.Name) {
		return
	}
	mounted, err := tc.mountedSecretNames(secret.Namespace, mountedByNamespace)
	if err != nil {
		logger.Error(err, "Resolving mounted secrets")
		return
	}
	if mounted.Has(secret.Name) {
		return
	}

	invalidSince := secret.Labels[InvalidSinceLabelKey]
	// Missing or malformed: (re)start the grace period today.
	if _, err := time.Parse(dateFormat, invalidSince); err != nil {
		tc.markInvalid(ctx, logger, secret, now.Format(dateFormat))
		return
	}
	if invalidSince >= cutoffDate {
		return
	}

	logger.Info("Delete auto-generated service account token", "creationTime", secret.CreationTimestamp, "lastUsed", lastUsed, "invalidSince", invalidSince)
	// The resourceVersion precondition keeps a Secret that was used or
	// changed since our cache saw it.
	err = tc.client.CoreV1().Secrets(secret.Namespace).Delete(ctx, secret.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &secret.ResourceVersion},
	})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting legacy service account token", "serviceaccount", sa.Name)
	}
}

// markInvalid sets InvalidSinceLabelKey to today with a merge patch that
// carries the UID, so it cannot land on a recreated Secret.
func (tc *Controller) markInvalid(ctx context.Context, logger klog.Logger, secret *v1.Secret, today string) {
	logger.Info("Mark the auto-generated service account token as invalid", "invalidSince", today)
	patch, err := json.Marshal(applycorev1.Secret(secret.Name, secret.Namespace).
		WithUID(secret.UID).
		WithLabels(map[string]string{InvalidSinceLabelKey: today}))
	if err != nil {
		logger.Error(err, "Failed to marshal invalid since label")
		return
	}
	if _, err := tc.client.CoreV1().Secrets(secret.Namespace).Patch(ctx, secret.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		logger.Error(err, "Failed to label legacy service account token secret with invalid since date")
	}
}

// serviceAccountOf returns the ServiceAccount a token Secret names in its
// annotations, or nil if there is none or its UID differs from the one
// recorded (the Secret belonged to an earlier account of that name).
func (tc *Controller) serviceAccountOf(secret *v1.Secret) (*v1.ServiceAccount, error) {
	name := secret.Annotations[v1.ServiceAccountNameKey]
	if name == "" {
		return nil, nil
	}
	sa, err := tc.saLister.ServiceAccounts(secret.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if uid := types.UID(secret.Annotations[v1.ServiceAccountUIDKey]); uid != "" && uid != sa.UID {
		return nil, nil
	}
	return sa, nil
}

func referencesSecret(sa *v1.ServiceAccount, name string) bool {
	for _, ref := range sa.Secrets {
		if ref.Name == name {
			return true
		}
	}
	return false
}

// mountedSecretNames is every Secret name the namespace's pods refer to,
// computed once per namespace per pass.
func (tc *Controller) mountedSecretNames(namespace string, cached map[string]sets.Set[string]) (sets.Set[string], error) {
	if names, ok := cached[namespace]; ok {
		return names, nil
	}
	pods, err := tc.podLister.Pods(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to get pod list from pod cache: %w", err)
	}
	names := sets.New[string]()
	for _, pod := range pods {
		names.Insert(podSecretNames(pod)...)
	}
	cached[namespace] = names
	return names, nil
}

// latestPossibleTrackedSince is the start of the day after the one the API
// server recorded as the beginning of tracking: a token used on that day
// may have been used before tracking began. The ConfigMap is read from the
// API because the controller's RBAC role allows get on it only.
func (tc *Controller) latestPossibleTrackedSince(ctx context.Context) (time.Time, error) {
	cm, err := tc.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, TrackingConfigMapName, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	since, ok := cm.Data[TrackingConfigMapDataKey]
	if !ok {
		return time.Time{}, fmt.Errorf("configMap does not have since label")
	}
	day, err := time.Parse(dateFormat, since)
	if err != nil {
		return time.Time{}, fmt.Errorf("error parsing trackedSince time: %w", err)
	}
	return day.AddDate(0, 0, 1), nil
}
