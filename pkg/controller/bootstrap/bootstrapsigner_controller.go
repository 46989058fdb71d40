package bootstrap

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// SignerOptions configures a Signer.
type SignerOptions struct {
	// ConfigMapNamespace and ConfigMapName locate the ConfigMap to sign.
	ConfigMapNamespace string
	ConfigMapName      string
	// TokenSecretNamespace is where token Secrets live.
	TokenSecretNamespace string
	// ConfigMapResync and SecretResync are the informer resync periods of
	// the signer's handlers; zero never resyncs.
	ConfigMapResync time.Duration
	SecretResync    time.Duration
}

// DefaultSignerOptions signs kube-public/cluster-info with the tokens in
// kube-system, as the controller manager does.
func DefaultSignerOptions() SignerOptions {
	return SignerOptions{
		ConfigMapNamespace:   metav1.NamespacePublic,
		ConfigMapName:        bootstrapapi.ConfigMapClusterInfo,
		TokenSecretNamespace: metav1.NamespaceSystem,
	}
}

// Signer keeps one jws-kubeconfig-<token-id> key in the ConfigMap per
// signing token, each the detached JWS of the kubeconfig key under that
// token, and no others.
type Signer struct {
	client          clientset.Interface
	cmNamespace     string
	cmName          string
	secretNamespace string
	clock           clock.PassiveClock

	secretLister corelisters.SecretLister
	secretSynced cache.InformerSynced
	cmLister     corelisters.ConfigMapLister
	cmSynced     cache.InformerSynced

	// queue only ever holds the ConfigMap's key: it collapses bursts of
	// ConfigMap and Secret events into one signing pass.
	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewSigner wires the signer to the shared Secret and ConfigMap informers.
func NewSigner(cl clientset.Interface, secrets coreinformers.SecretInformer, configMaps coreinformers.ConfigMapInformer, options SignerOptions) (*Signer, error) {
	e := &Signer{
		client:          cl,
		cmNamespace:     options.ConfigMapNamespace,
		cmName:          options.ConfigMapName,
		secretNamespace: options.TokenSecretNamespace,
		clock:           clock.RealClock{},
		secretLister:    secrets.Lister(),
		secretSynced:    secrets.Informer().HasSynced,
		cmLister:        configMaps.Lister(),
		cmSynced:        configMaps.Informer().HasSynced,
		queue:           controller.NewNamedQueue("bootstrap_signer_queue"),
	}
	e.loop = controller.WorkLoop[string]{Name: "bootstrap_signer_queue", Queue: e.queue, Sync: e.signConfigMap}

	poke := func(interface{}) { e.queue.Add(e.configMapKey()) }
	// A deleted ConfigMap has nothing left to sign, so only adds and updates.
	if _, err := configMaps.Informer().AddEventHandlerWithResyncPeriod(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj interface{}) bool { return e.isClusterInfo(unwrap(obj)) },
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    poke,
			UpdateFunc: func(_, newObj interface{}) { poke(newObj) },
		},
	}, options.ConfigMapResync); err != nil {
		return nil, fmt.Errorf("adding ConfigMap event handler: %w", err)
	}
	if _, err := secrets.Informer().AddEventHandlerWithResyncPeriod(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj interface{}) bool { return e.isTokenSecret(unwrap(obj)) },
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    poke,
			UpdateFunc: func(_, newObj interface{}) { poke(newObj) },
			DeleteFunc: poke,
		},
	}, options.SecretResync); err != nil {
		return nil, fmt.Errorf("adding Secret event handler: %w", err)
	}
	return e, nil
}

// Run waits for the caches and signs until ctx is cancelled. One worker is
// enough: there is one ConfigMap.
func (e *Signer) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	e.loop.Run(ctx, 1, e.cmSynced, e.secretSynced)
}

func (e *Signer) configMapKey() string { return e.cmNamespace + "/" + e.cmName }

// unwrap returns the last known state of a deleted object.
func unwrap(obj interface{}) interface{} {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (e *Signer) isClusterInfo(obj interface{}) bool {
	cm, ok := obj.(*v1.ConfigMap)
	return ok && cm.Namespace == e.cmNamespace && cm.Name == e.cmName
}

func (e *Signer) isTokenSecret(obj interface{}) bool {
	return isTokenSecretIn(obj, e.secretNamespace)
}

// signConfigMap recomputes every signature from the cached ConfigMap and
// tokens, and writes the ConfigMap only if a signature changed, appeared
// or must go.
func (e *Signer) signConfigMap(ctx context.Context, _ string) error {
	logger := klog.FromContext(ctx)
	cm, err := e.cmLister.ConfigMaps(e.cmNamespace).Get(e.cmName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	content, ok := cm.Data[bootstrapapi.KubeConfigKey]
	if !ok {
		logger.V(3).Info("No key in ConfigMap", "key", bootstrapapi.KubeConfigKey, "configMap", klog.KObj(cm))
		return nil
	}

	tokens, nextExpiry, err := e.signingTokens(logger)
	if err != nil {
		return err
	}
	// A token stops signing when it expires, even if nothing deletes it.
	if nextExpiry > 0 {
		e.queue.AddAfter(e.configMapKey(), nextExpiry)
	}

	want := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		if !strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) {
			want[k] = v
		}
	}
	for id, secret := range tokens {
		sig, err := jws.ComputeDetachedSignature(content, id, secret)
		if err != nil {
			// As upstream: the key is still written, with an empty signature.
			utilruntime.HandleErrorWithLogger(logger, err, "Unable to compute signature", "tokenID", id)
		}
		want[bootstrapapi.JWSSignatureKeyPrefix+id] = sig
	}
	if maps.Equal(cm.Data, want) {
		return nil
	}

	updated := cm.DeepCopy()
	updated.Data = want
	_, err = e.client.CoreV1().ConfigMaps(updated.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	// Both mean the ConfigMap changed under us; its event requeues us.
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		logger.V(3).Info("Error updating ConfigMap", "configMap", klog.KObj(cm), "err", err)
		return nil
	}
	return err
}

// signingTokens maps the ID of every token that may sign to its secret,
// and returns how long until the first of them expires (0 if none does).
func (e *Signer) signingTokens(logger klog.Logger) (map[string]string, time.Duration, error) {
	secrets, err := e.secretLister.Secrets(e.secretNamespace).List(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	now := e.clock.Now()
	tokens := map[string]string{}
	var nextExpiry time.Duration
	for _, s := range secrets {
		if s.Type != bootstrapapi.SecretTypeBootstrapToken {
			continue
		}
		id, secret, ok := signingToken(logger, s, now)
		if !ok {
			continue
		}
		tokens[id] = secret
		if left, _ := bootstrapsecretutil.GetExpiration(s, now); left > 0 && (nextExpiry == 0 || left < nextExpiry) {
			nextExpiry = left
		}
	}
	return tokens, nextExpiry, nil
}
