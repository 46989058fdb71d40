package evaluator

import (
	"cmp"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// deviceClassCache maps DRA device classes to the extended resource names
// pods may request them by, fed by a DeviceClass informer. Every class is
// requestable as deviceclass.resource.kubernetes.io/<class>; a class may
// also name an extended resource (spec.extendedResourceName), which then
// maps to the newest class claiming it (ties: the smaller name), so a
// migration to a new class takes effect once it exists.
type deviceClassCache struct {
	mu sync.RWMutex
	// byResource: extended resource name -> class providing it.
	byResource map[corev1.ResourceName]*resourceapi.DeviceClass
	// byClass: class name -> its explicit extended resource name.
	byClass map[string]string
}

var _ cache.ResourceEventHandler = &deviceClassCache{}

func newDeviceClassCache() *deviceClassCache {
	return &deviceClassCache{
		byResource: map[corev1.ResourceName]*resourceapi.DeviceClass{},
		byClass:    map[string]string{},
	}
}

// classFor returns the class an extended resource name maps to, or nil.
func (c *deviceClassCache) classFor(name corev1.ResourceName) *resourceapi.DeviceClass {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byResource[name]
}

// extendedResourceOf returns a class's explicit extended resource name.
func (c *deviceClassCache) extendedResourceOf(class string) string {
	if c == nil {
		return ""
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byClass[class]
}

func (c *deviceClassCache) OnAdd(obj interface{}, _ bool) {
	if dc, ok := obj.(*resourceapi.DeviceClass); ok {
		c.update(dc, nil)
	}
}

func (c *deviceClassCache) OnUpdate(oldObj, newObj interface{}) {
	dc, ok1 := newObj.(*resourceapi.DeviceClass)
	old, ok2 := oldObj.(*resourceapi.DeviceClass)
	if ok1 && ok2 {
		c.update(dc, old)
	}
}

func (c *deviceClassCache) OnDelete(obj interface{}) {
	obj = controller.Untombstone(obj)
	dc, ok := obj.(*resourceapi.DeviceClass)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byResource, implicitExtendedResource(dc.Name))
	if dc.Spec.ExtendedResourceName != nil {
		delete(c.byResource, corev1.ResourceName(*dc.Spec.ExtendedResourceName))
	}
	delete(c.byClass, dc.Name)
}

func implicitExtendedResource(class string) corev1.ResourceName {
	return corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class)
}

func (c *deviceClassCache) update(dc, old *resourceapi.DeviceClass) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if dc.Spec.ExtendedResourceName != nil {
		c.byClass[dc.Name] = *dc.Spec.ExtendedResourceName
	} else {
		delete(c.byClass, dc.Name)
	}

	// A newer class already providing the same extended resource keeps it,
	// and then this class's mappings stay as they were (this includes an
	// update of the holder itself, as upstream).
	if dc.Spec.ExtendedResourceName != nil {
		if holder := c.byResource[corev1.ResourceName(*dc.Spec.ExtendedResourceName)]; holder != nil {
			switch cmp.Compare(dc.CreationTimestamp.UnixNano(), holder.CreationTimestamp.UnixNano()) {
			case -1:
				return
			case 0:
				if dc.Name >= holder.Name {
					return
				}
			}
		}
	}
	if old != nil {
		delete(c.byResource, implicitExtendedResource(old.Name))
		if old.Spec.ExtendedResourceName != nil {
			delete(c.byResource, corev1.ResourceName(*old.Spec.ExtendedResourceName))
		}
	}
	if dc.Spec.ExtendedResourceName != nil {
		c.byResource[corev1.ResourceName(*dc.Spec.ExtendedResourceName)] = dc
	}
	c.byResource[implicitExtendedResource(dc.Name)] = dc
}
