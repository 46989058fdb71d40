package bootstrap

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// TokenCleanerOptions configures a TokenCleaner.
type TokenCleanerOptions struct {
	// TokenSecretNamespace is where token Secrets live.
	TokenSecretNamespace string
	// SecretResync is the informer resync period of the cleaner's handler;
	// zero never resyncs.
	SecretResync time.Duration
}

// DefaultTokenCleanerOptions cleans kube-system, as the controller manager
// does.
func DefaultTokenCleanerOptions() TokenCleanerOptions {
	return TokenCleanerOptions{TokenSecretNamespace: metav1.NamespaceSystem}
}

// TokenCleaner deletes bootstrap token Secrets once their expiration has
// passed. A token that expires later is looked at again when it does.
type TokenCleaner struct {
	client          clientset.Interface
	secretNamespace string
	clock           clock.PassiveClock

	secretLister corelisters.SecretLister
	secretSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewTokenCleaner wires the cleaner to the shared Secret informer.
func NewTokenCleaner(cl clientset.Interface, secrets coreinformers.SecretInformer, options TokenCleanerOptions) (*TokenCleaner, error) {
	tc := &TokenCleaner{
		client:          cl,
		secretNamespace: options.TokenSecretNamespace,
		clock:           clock.RealClock{},
		secretLister:    secrets.Lister(),
		secretSynced:    secrets.Informer().HasSynced,
		queue:           controller.NewNamedQueue("token_cleaner"),
	}
	tc.loop = controller.WorkLoop[string]{Name: "token_cleaner", Queue: tc.queue, Sync: tc.syncSecret}

	// Deleted Secrets need no cleaning, so only adds and updates.
	if _, err := secrets.Informer().AddEventHandlerWithResyncPeriod(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj interface{}) bool { return isTokenSecretIn(obj, tc.secretNamespace) },
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    tc.enqueue,
			UpdateFunc: func(_, newObj interface{}) { tc.enqueue(newObj) },
		},
	}, options.SecretResync); err != nil {
		return nil, fmt.Errorf("adding Secret event handler: %w", err)
	}
	return tc, nil
}

// Run waits for the Secret cache and cleans with one worker until ctx is
// cancelled.
func (tc *TokenCleaner) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting token cleaner controller")
	defer logger.Info("Shutting down token cleaner controller")
	tc.loop.Run(ctx, 1, tc.secretSynced)
}

func (tc *TokenCleaner) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	tc.queue.Add(key)
}

// syncSecret deletes the token Secret at key if it has expired, or comes
// back to it when it will have.
func (tc *TokenCleaner) syncSecret(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing secret", "secret", key, "elapsedTime", time.Since(start))
	}()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	secret, err := tc.secretLister.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("Secret has been deleted", "secret", key)
		return nil
	}
	if err != nil {
		return err
	}
	if secret.Type != bootstrapapi.SecretTypeBootstrapToken {
		return nil
	}

	left, expired := bootstrapsecretutil.GetExpiration(secret, tc.clock.Now())
	if !expired {
		// A token without an expiration (left == 0) lives until removed.
		if left > 0 {
			tc.queue.AddAfter(key, left)
		}
		return nil
	}
	logger.V(3).Info("Deleting expired secret", "secret", klog.KObj(secret))
	// The UID precondition spares a Secret recreated under the same name.
	var opts metav1.DeleteOptions
	if secret.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &secret.UID}
	}
	err = tc.client.CoreV1().Secrets(secret.Namespace).Delete(ctx, secret.Name, opts)
	// Already gone, or replaced by a Secret that gets its own event.
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
