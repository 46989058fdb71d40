package serviceaccount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// tokensQueueName names both queues of the tokens controller, as upstream
// does, so their workqueue_* series add up under one name.
const tokensQueueName = "serviceaccount_tokens_service"

// defaultMaxRetries is how often a key is retried when options leave
// MaxRetries at zero.
const defaultMaxRetries = 10

// RemoveTokenBackoff paces the retries of removing a deleted token Secret
// from its ServiceAccount's secrets list when updates conflict.
var RemoveTokenBackoff = wait.Backoff{
	Steps:    10,
	Duration: 100 * time.Millisecond,
	Jitter:   1.0,
}

// TokensControllerOptions configures a TokensController.
type TokensControllerOptions struct {
	// TokenGenerator signs the tokens (JWTTokenGenerator(LegacyIssuer, key)).
	TokenGenerator TokenGenerator
	// ServiceAccountResync and SecretResync are the resync periods of the
	// event handlers; zero means no periodic resync.
	ServiceAccountResync time.Duration
	SecretResync         time.Duration
	// RootCA is written as ca.crt into every token Secret; empty leaves
	// ca.crt alone.
	RootCA []byte
	// MaxRetries bounds how often a failing key is retried; zero means 10.
	MaxRetries int
}

// TokensController populates kubernetes.io/service-account-token Secrets and
// deletes those whose ServiceAccount is gone.
type TokensController struct {
	client clientset.Interface
	token  TokenGenerator
	rootCA []byte

	serviceAccounts      corelisters.ServiceAccountLister
	secrets              corelisters.SecretLister
	serviceAccountSynced cache.InformerSynced
	secretSynced         cache.InformerSynced

	// syncServiceAccountQueue deletes the tokens of ServiceAccounts that
	// no longer exist.
	syncServiceAccountQueue workqueue.TypedRateLimitingInterface[serviceAccountQueueKey]
	// syncSecretQueue deletes tokens whose ServiceAccount is gone, fills in
	// missing token/namespace data or a stale ca.crt, and drops references
	// to deleted tokens from their ServiceAccount.
	syncSecretQueue workqueue.TypedRateLimitingInterface[secretQueueKey]

	saLoop     controller.WorkLoop[serviceAccountQueueKey]
	secretLoop controller.WorkLoop[secretQueueKey]
}

// NewTokensController wires the controller to its informers. The client
// must not itself authenticate with a token this controller mints.
func NewTokensController(logger klog.Logger, serviceAccounts coreinformers.ServiceAccountInformer, secrets coreinformers.SecretInformer, cl clientset.Interface, options TokensControllerOptions) (*TokensController, error) {
	if options.TokenGenerator == nil {
		return nil, errors.New("a TokenGenerator is required")
	}
	maxRetries := options.MaxRetries
	if maxRetries == 0 {
		maxRetries = defaultMaxRetries
	}
	e := &TokensController{
		client:                  cl,
		token:                   options.TokenGenerator,
		rootCA:                  options.RootCA,
		serviceAccounts:         serviceAccounts.Lister(),
		secrets:                 secrets.Lister(),
		serviceAccountSynced:    serviceAccounts.Informer().HasSynced,
		secretSynced:            secrets.Informer().HasSynced,
		syncServiceAccountQueue: controller.NewNamedTypedQueue[serviceAccountQueueKey](tokensQueueName),
		syncSecretQueue:         controller.NewNamedTypedQueue[secretQueueKey](tokensQueueName),
	}
	// The syncs return an error only for what is worth retrying; the rest
	// they log and drop.
	e.saLoop = controller.WorkLoop[serviceAccountQueueKey]{
		Name: "serviceaccount-tokens-serviceaccount", Queue: e.syncServiceAccountQueue,
		Sync: e.syncServiceAccount, MaxRetries: maxRetries,
	}
	e.secretLoop = controller.WorkLoop[secretQueueKey]{
		Name: "serviceaccount-tokens-secret", Queue: e.syncSecretQueue,
		Sync: e.syncSecret, MaxRetries: maxRetries,
	}

	if _, err := serviceAccounts.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.queueServiceAccountSync,
		UpdateFunc: func(_, newObj interface{}) { e.queueServiceAccountSync(newObj) },
		DeleteFunc: e.queueServiceAccountSync,
	}, options.ServiceAccountResync); err != nil {
		return nil, fmt.Errorf("adding ServiceAccount event handler: %w", err)
	}

	resync := options.SecretResync
	if _, err := secrets.Informer().AddEventHandlerWithOptions(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj interface{}) bool {
			s := secretFrom(obj)
			if s == nil {
				utilruntime.HandleErrorWithLogger(logger, nil, "Unexpected object type passed to tokens controller", "type", fmt.Sprintf("%T", obj))
				return false
			}
			return s.Type == v1.SecretTypeServiceAccountToken
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    e.queueSecretSync,
			UpdateFunc: func(_, newObj interface{}) { e.queueSecretSync(newObj) },
			DeleteFunc: e.queueSecretSync,
		},
	}, cache.HandlerOptions{Logger: &logger, ResyncPeriod: &resync}); err != nil {
		return nil, fmt.Errorf("adding Secret event handler: %w", err)
	}
	return e, nil
}

// Run waits for the caches, then runs workers goroutines on each of the
// two queues until ctx is cancelled.
func (e *TokensController) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "name", "serviceaccount-token")
	defer logger.Info("Shutting down controller", "name", "serviceaccount-token")

	if !controller.WaitForCacheSync(ctx, "serviceaccount-token", e.serviceAccountSynced, e.secretSynced) {
		e.syncServiceAccountQueue.ShutDown()
		e.syncSecretQueue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.saLoop.RunWorkers(ctx, workers) })
	wg.Go(func() { e.secretLoop.RunWorkers(ctx, workers) })
	wg.Wait()
}

func (e *TokensController) queueServiceAccountSync(obj interface{}) {
	obj = controller.Untombstone(obj)
	sa, ok := obj.(*v1.ServiceAccount)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("error decoding object, invalid type: %T", obj))
		return
	}
	e.syncServiceAccountQueue.Add(makeServiceAccountKey(sa))
}

// queueSecretSync also unwraps tombstones, so a token deleted while the
// watch was down still gets its ServiceAccount reference removed.
func (e *TokensController) queueSecretSync(obj interface{}) {
	if s := secretFrom(obj); s != nil {
		e.syncSecretQueue.Add(makeSecretQueueKey(s))
	}
}

func secretFrom(obj interface{}) *v1.Secret {
	obj = controller.Untombstone(obj)
	s, _ := obj.(*v1.Secret)
	return s
}

// syncServiceAccount deletes the tokens of a ServiceAccount that is gone
// (or was replaced by one with another UID).
func (e *TokensController) syncServiceAccount(ctx context.Context, key serviceAccountQueueKey) error {
	logger := klog.FromContext(ctx)
	if !key.valid() {
		logger.Error(nil, "Invalid service account key", "key", key)
		return nil
	}
	sa, err := e.getServiceAccount(ctx, key.namespace, key.name, key.uid, false)
	if err != nil {
		return fmt.Errorf("getting service account: %w", err)
	}
	if sa != nil {
		return nil
	}
	logger.V(4).Info("Service account deleted, removing tokens", "namespace", key.namespace, "serviceaccount", key.name)
	gone := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: key.namespace, Name: key.name, UID: key.uid}}
	retry, err := e.deleteTokens(ctx, gone)
	return retryable(logger, retry, err, "Error deleting serviceaccount tokens", "namespace", key.namespace, "serviceaccount", key.name)
}

// syncSecret reconciles one token Secret against its ServiceAccount.
func (e *TokensController) syncSecret(ctx context.Context, key secretQueueKey) error {
	logger := klog.FromContext(ctx)
	if !key.valid() {
		logger.Error(nil, "Invalid secret queue key", "key", key)
		return nil
	}
	secretRef := klog.KRef(key.namespace, key.name)
	saRef := klog.KRef(key.namespace, key.saName)

	secret, err := e.getSecret(key.namespace, key.name, key.uid)
	if err != nil {
		return fmt.Errorf("getting secret: %w", err)
	}
	if secret == nil {
		// The token is gone: drop it from its ServiceAccount's secrets list.
		// Best effort, never retried, as upstream.
		if sa, saErr := e.getServiceAccount(ctx, key.namespace, key.saName, key.saUID, false); saErr == nil && sa != nil {
			if err := clientretry.RetryOnConflict(RemoveTokenBackoff, func() error {
				return e.removeSecretReference(ctx, key.namespace, key.saName, key.saUID, key.name)
			}); err != nil {
				logger.Error(err, "Removing secret reference", "secret", secretRef, "serviceAccount", saRef)
			}
		}
		return nil
	}

	sa, err := e.getServiceAccount(ctx, key.namespace, key.saName, key.saUID, true)
	if err != nil {
		return fmt.Errorf("getting service account %s: %w", saRef, err)
	}
	if sa == nil {
		logger.V(4).Info("Service account does not exist, deleting token", "secret", secretRef)
		retry, err := e.deleteToken(ctx, key.namespace, key.name, key.uid)
		return retryable(logger, retry, err, "Deleting serviceaccount token", "secret", secretRef, "serviceAccount", saRef)
	}
	retry, err := e.generateTokenIfNeeded(ctx, sa, secret)
	return retryable(logger, retry, err, "Populating serviceaccount token", "secret", secretRef, "serviceAccount", saRef)
}

// retryable turns a (retry, err) outcome into what the work loop expects:
// the error when the key should be retried, nil (after logging) otherwise.
func retryable(logger klog.Logger, retry bool, err error, msg string, kv ...interface{}) error {
	if err == nil {
		return nil
	}
	if retry {
		return fmt.Errorf("%s: %w", msg, err)
	}
	logger.Error(err, msg, kv...)
	return nil
}

func (e *TokensController) deleteTokens(ctx context.Context, sa *v1.ServiceAccount) (bool, error) {
	tokens, err := e.listTokenSecrets(sa)
	if err != nil {
		// A cache lookup failing will not get better by retrying.
		return false, err
	}
	retry := false
	var errs []error
	for _, token := range tokens {
		r, err := e.deleteToken(ctx, token.Namespace, token.Name, token.UID)
		if err != nil {
			errs = append(errs, err)
		}
		retry = retry || r
	}
	return retry, utilerrors.NewAggregate(errs)
}

// deleteToken deletes a token Secret, guarded by its UID so a newer Secret
// of the same name survives.
func (e *TokensController) deleteToken(ctx context.Context, ns, name string, uid types.UID) (bool, error) {
	var opts metav1.DeleteOptions
	if len(uid) > 0 {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := e.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	// NotFound: already gone. Conflict: the UID precondition failed, so the
	// Secret is another one now.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return true, err
}

// secretUpdateNeeded reports which of ca.crt, namespace and token to fill.
// A namespace or token already set is kept whatever it holds.
func (e *TokensController) secretUpdateNeeded(secret *v1.Secret) (needsCA, needsNamespace, needsToken bool) {
	needsCA = len(e.rootCA) > 0 && !bytes.Equal(secret.Data[v1.ServiceAccountRootCAKey], e.rootCA)
	needsNamespace = len(secret.Data[v1.ServiceAccountNamespaceKey]) == 0
	needsToken = len(secret.Data[v1.ServiceAccountTokenKey]) == 0
	return needsCA, needsNamespace, needsToken
}

// generateTokenIfNeeded fills the Secret's missing data, working on a fresh
// GET so the cache's copy is never modified.
func (e *TokensController) generateTokenIfNeeded(ctx context.Context, sa *v1.ServiceAccount, cached *v1.Secret) (bool, error) {
	if needsCA, needsNamespace, needsToken := e.secretUpdateNeeded(cached); !needsCA && !needsNamespace && !needsToken {
		return false, nil
	}

	secrets := e.client.CoreV1().Secrets(cached.Namespace)
	live, err := secrets.Get(ctx, cached.Name, metav1.GetOptions{})
	if err != nil {
		return !apierrors.IsNotFound(err), err
	}
	if live.ResourceVersion != cached.ResourceVersion {
		// The update event for the newer version will bring us back.
		klog.FromContext(ctx).V(2).Info("Secret is not up to date, skipping token population", "secret", klog.KObj(live))
		return false, nil
	}
	needsCA, needsNamespace, needsToken := e.secretUpdateNeeded(live)
	if !needsCA && !needsNamespace && !needsToken {
		return false, nil
	}

	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	if needsCA {
		live.Data[v1.ServiceAccountRootCAKey] = e.rootCA
	}
	if needsNamespace {
		live.Data[v1.ServiceAccountNamespaceKey] = []byte(live.Namespace)
	}
	if needsToken {
		claims, private := LegacyClaims(sa, live)
		token, err := e.token.GenerateToken(ctx, claims, private)
		if err != nil {
			return false, err
		}
		live.Data[v1.ServiceAccountTokenKey] = []byte(token)
	}
	// Record the UID too, so the token dies with this incarnation of the
	// ServiceAccount and not a later one of the same name.
	live.Annotations[v1.ServiceAccountNameKey] = sa.Name
	live.Annotations[v1.ServiceAccountUIDKey] = string(sa.UID)

	_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
	// Conflict: someone else wrote it and their update event will requeue
	// it. NotFound: nothing left to populate.
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	return false, nil
}

// removeSecretReference drops secretName from the ServiceAccount's secrets
// list, working on a fresh GET.
func (e *TokensController) removeSecretReference(ctx context.Context, ns, saName string, saUID types.UID, secretName string) error {
	client := e.client.CoreV1().ServiceAccounts(ns)
	sa, err := client.Get(ctx, saName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(saUID) > 0 && saUID != sa.UID {
		return nil
	}
	kept := make([]v1.ObjectReference, 0, len(sa.Secrets))
	for _, ref := range sa.Secrets {
		if ref.Name != secretName {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(sa.Secrets) {
		return nil
	}
	sa.Secrets = kept
	_, err = client.Update(ctx, sa, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// getServiceAccount returns the named ServiceAccount if it exists with the
// given UID (any UID when uid is empty), else nil. fetchOnCacheMiss makes a
// live GET when the cache has no match, so a token created right after its
// ServiceAccount is not deleted because the cache lags.
func (e *TokensController) getServiceAccount(ctx context.Context, ns, name string, uid types.UID, fetchOnCacheMiss bool) (*v1.ServiceAccount, error) {
	sa, err := e.serviceAccounts.ServiceAccounts(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if sa != nil && (len(uid) == 0 || uid == sa.UID) {
		return sa, nil
	}
	if !fetchOnCacheMiss {
		return nil, nil
	}
	sa, err = e.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(uid) == 0 || uid == sa.UID {
		return sa, nil
	}
	return nil, nil
}

// getSecret returns the cached Secret if it exists with the given UID.
func (e *TokensController) getSecret(ns, name string, uid types.UID) (*v1.Secret, error) {
	secret, err := e.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(uid) == 0 || uid == secret.UID {
		return secret, nil
	}
	return nil, nil
}

// listTokenSecrets returns the cached token Secrets that belong to sa.
func (e *TokensController) listTokenSecrets(sa *v1.ServiceAccount) ([]*v1.Secret, error) {
	all, err := e.secrets.Secrets(sa.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*v1.Secret
	for _, s := range all {
		if isServiceAccountToken(s, sa) {
			out = append(out, s)
		}
	}
	return out, nil
}

// isServiceAccountToken: a token Secret naming sa, and sa's UID if it
// records one.
func isServiceAccountToken(secret *v1.Secret, sa *v1.ServiceAccount) bool {
	if secret.Type != v1.SecretTypeServiceAccountToken {
		return false
	}
	if secret.Annotations[v1.ServiceAccountNameKey] != sa.Name {
		return false
	}
	uid := secret.Annotations[v1.ServiceAccountUIDKey]
	return len(uid) == 0 || uid == string(sa.UID)
}

// serviceAccountQueueKey carries enough to delete a ServiceAccount's tokens
// after it is gone from the cache.
type serviceAccountQueueKey struct {
	namespace string
	name      string
	uid       types.UID
}

func makeServiceAccountKey(sa *v1.ServiceAccount) serviceAccountQueueKey {
	return serviceAccountQueueKey{namespace: sa.Namespace, name: sa.Name, uid: sa.UID}
}

func (k serviceAccountQueueKey) valid() bool {
	return k.namespace != "" && k.name != "" && k.uid != ""
}

// secretQueueKey carries enough to find a token's ServiceAccount, or to
// remove the reference to it after the Secret is gone.
type secretQueueKey struct {
	namespace string
	name      string
	uid       types.UID
	saName    string
	// saUID is empty for tokens without the service-account.uid annotation.
	saUID types.UID
}

func makeSecretQueueKey(s *v1.Secret) secretQueueKey {
	return secretQueueKey{
		namespace: s.Namespace,
		name:      s.Name,
		uid:       s.UID,
		saName:    s.Annotations[v1.ServiceAccountNameKey],
		saUID:     types.UID(s.Annotations[v1.ServiceAccountUIDKey]),
	}
}

func (k secretQueueKey) valid() bool {
	return k.namespace != "" && k.name != "" && k.uid != "" && k.saName != ""
}
