package resourcepoolstatusrequest

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// maxListItems is the API's limit on the status lists; going over fails
// validation, so a pool reports an error instead of a cut list.
const maxListItems = 32

// Prefixes of a pool's validationError, as upstream writes them.
const (
	// prefixPoolIncomplete is the one transient error: the request is retried.
	prefixPoolIncomplete          = "PoolIncomplete:"
	prefixPartitionTypeMissing    = "PartitionTypeMissing:"
	prefixPartitionCostMismatch   = "PartitionCostMismatch:"
	prefixPartitionSummaryOverCap = "PartitionSummaryOverCap:"
	prefixShareableOverCap        = "ShareableSummaryOverCap:"
)

// counters maps counter set -> counter -> quantity.
type counters map[string]map[string]resource.Quantity

// device is what the views need of one device of a pool.
type device struct {
	name string
	// partitionAttr is the attribute grouping the device: its slice's
	// partitionTypeAttribute, else the request's default (see resolvePartitions).
	partitionAttr    string
	partitionType    string
	hasPartitionType bool
	cost             []resourcev1.DeviceCounterConsumption
	shareable        bool
	capacity         map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	attributes       map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
}

func devicesOf(slice *resourcev1.ResourceSlice) []device {
	attr := ""
	if a := slice.Spec.PartitionTypeAttribute; a != nil {
		attr = string(*a)
	}
	out := make([]device, 0, len(slice.Spec.Devices))
	for i := range slice.Spec.Devices {
		d := &slice.Spec.Devices[i]
		out = append(out, device{
			name:          d.Name,
			partitionAttr: attr,
			cost:          d.ConsumesCounters,
			shareable:     ptr.Deref(d.AllowMultipleAllocations, false),
			capacity:      d.Capacity,
			attributes:    d.Attributes,
		})
	}
	return out
}

// stringAttribute returns a device's string attribute named by its fully
// qualified name; attributes of the driver's own domain may be stored
// without the domain, and the qualified form wins when both exist.
func stringAttribute(driver string, attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, name string) (string, bool) {
	a, ok := attrs[resourcev1.QualifiedName(name)]
	if !ok {
		if short, found := strings.CutPrefix(name, driver+"/"); found {
			a, ok = attrs[resourcev1.QualifiedName(short)]
		}
	}
	if !ok || a.StringValue == nil {
		return "", false
	}
	return *a.StringValue, true
}

// pool is the input of the views for one complete pool.
type pool struct {
	driver, name   string
	devices        []device
	sharedCounters []resourcev1.CounterSet
	// inUse: devices allocated to a claim without admin access.
	inUse map[string]struct{}
	// consumed: capacity consumed by such claims, summed.
	consumed map[resourcev1.QualifiedName]resource.Quantity
}

// resolvePartitions sets each device's partition type. A slice's own
// attribute wins; the request's only applies when no slice of the pool
// names one (drivers not yet declaring it).
func resolvePartitions(requestAttr *string, p *pool) {
	declared := slices.ContainsFunc(p.devices, func(d device) bool { return d.partitionAttr != "" })
	for i := range p.devices {
		d := &p.devices[i]
		if d.partitionAttr == "" {
			if declared || requestAttr == nil {
				continue
			}
			d.partitionAttr = *requestAttr
		}
		d.partitionType, d.hasPartitionType = stringAttribute(p.driver, d.attributes, d.partitionAttr)
	}
}

// views computes the partition and shareable summaries. A view that cannot
// be computed is nil and the first problem is returned; on any problem the
// partition view is dropped.
func views(p pool) ([]resourcev1alpha3.PartitionTypeStatus, *resourcev1alpha3.ShareableSummaryStatus, string) {
	var (
		partitions []resourcev1alpha3.PartitionTypeStatus
		problem    string
	)
	if slices.ContainsFunc(p.devices, func(d device) bool { return d.partitionAttr != "" }) {
		if len(p.sharedCounters) == 0 {
			problem = fmt.Sprintf("%s pool %s/%s declares partitionTypeAttribute but publishes no sharedCounters",
				prefixPartitionTypeMissing, p.driver, p.name)
		} else {
			partitions, problem = partitionSummary(p)
		}
	}
	shareable, shareProblem := shareableSummary(p)
	if problem == "" {
		problem = shareProblem
	}
	if shareProblem != "" {
		shareable = nil
	}
	if problem != "" {
		partitions = nil
	}
	return partitions, shareable, problem
}

// partitionSummary groups the counter-consuming devices by (attribute,
// type): how many there are and how many unused ones still fit in the
// shared counters left after the devices in use, each group measured on
// its own against that baseline.
func partitionSummary(p pool) ([]resourcev1alpha3.PartitionTypeStatus, string) {
	type key struct{ attr, typ string }
	type group struct {
		total   int32
		unused  []device
		costKey string
	}
	groups := map[key]*group{}
	for _, d := range p.devices {
		if len(d.cost) == 0 || d.partitionAttr == "" {
			continue
		}
		if !d.hasPartitionType {
			return nil, fmt.Sprintf("%s device %q in pool %s/%s does not carry partition type attribute %q",
				prefixPartitionTypeMissing, d.name, p.driver, p.name, d.partitionAttr)
		}
		k := key{d.partitionAttr, d.partitionType}
		g := groups[k]
		if g == nil {
			g = &group{costKey: costKey(d.cost)}
			groups[k] = g
		} else if costKey(d.cost) != g.costKey {
			return nil, fmt.Sprintf("%s devices of partition type %q in pool %s/%s consume different counters",
				prefixPartitionCostMismatch, d.partitionType, p.driver, p.name)
		}
		g.total++
		if _, used := p.inUse[d.name]; !used {
			g.unused = append(g.unused, d)
		}
	}
	left := countersLeft(p)
	out := make([]resourcev1alpha3.PartitionTypeStatus, 0, len(groups))
	for k, g := range groups {
		avail := left.clone()
		fit := int32(0)
		for _, d := range g.unused {
			if avail.fits(d.cost) {
				fit++
				avail.take(d.cost)
			}
		}
		out = append(out, resourcev1alpha3.PartitionTypeStatus{Attribute: k.attr, Type: k.typ, Total: ptr.To(g.total), Allocatable: ptr.To(fit)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Attribute != out[j].Attribute {
			return out[i].Attribute < out[j].Attribute
		}
		return out[i].Type < out[j].Type
	})
	if len(out) > maxListItems {
		return nil, fmt.Sprintf("%s pool %s/%s has %d partition types, exceeding the maximum of %d",
			prefixPartitionSummaryOverCap, p.driver, p.name, len(out), maxListItems)
	}
	return out, ""
}

// shareableSummary sums the capacity of devices that allow multiple
// allocations; nil when the pool has none.
func shareableSummary(p pool) (*resourcev1alpha3.ShareableSummaryStatus, string) {
	var full, partial int32
	total := map[resourcev1.QualifiedName]resource.Quantity{}
	found := false
	for _, d := range p.devices {
		if !d.shareable {
			continue
		}
		found = true
		if _, used := p.inUse[d.name]; used {
			partial++
		} else {
			full++
		}
		for name, c := range d.capacity {
			q := total[name].DeepCopy()
			q.Add(c.Value)
			total[name] = q
		}
	}
	if !found {
		return nil, ""
	}
	names := make([]resourcev1.QualifiedName, 0, len(total))
	for n := range total {
		names = append(names, n)
	}
	slices.Sort(names)
	caps := make([]resourcev1alpha3.ShareableCapacityStatus, 0, len(names))
	for _, n := range names {
		t := total[n]
		used := resource.Quantity{}
		if q, ok := p.consumed[n]; ok {
			used = q.DeepCopy()
		}
		avail := t.DeepCopy()
		avail.Sub(used)
		if avail.Sign() < 0 {
			avail = *resource.NewQuantity(0, t.Format)
		}
		caps = append(caps, resourcev1alpha3.ShareableCapacityStatus{Name: string(n), Total: &t, Consumed: &used, Available: &avail})
	}
	if len(caps) > maxListItems {
		return nil, fmt.Sprintf("%s pool %s/%s has %d shareable capacity keys, exceeding the maximum of %d",
			prefixShareableOverCap, p.driver, p.name, len(caps), maxListItems)
	}
	return &resourcev1alpha3.ShareableSummaryStatus{FullyAvailableDevices: ptr.To(full), PartiallyAvailableDevices: ptr.To(partial), Capacity: caps}, ""
}

// countersLeft is the shared counters minus what the devices in use
// consume (once per device, however many claims share it, as the
// scheduler counts).
func countersLeft(p pool) counters {
	c := counters{}
	for _, set := range p.sharedCounters {
		m := c[set.Name]
		if m == nil {
			m = map[string]resource.Quantity{}
			c[set.Name] = m
		}
		for name, v := range set.Counters {
			m[name] = v.Value.DeepCopy()
		}
	}
	for _, d := range p.devices {
		if _, used := p.inUse[d.name]; used {
			c.take(d.cost)
		}
	}
	return c
}

func (c counters) fits(cost []resourcev1.DeviceCounterConsumption) bool {
	for _, cc := range cost {
		for name, need := range cc.Counters {
			have, ok := c[cc.CounterSet][name]
			if !ok || have.Cmp(need.Value) < 0 {
				return false
			}
		}
	}
	return true
}

func (c counters) take(cost []resourcev1.DeviceCounterConsumption) {
	for _, cc := range cost {
		set := c[cc.CounterSet]
		for name, need := range cc.Counters {
			if have, ok := set[name]; ok {
				have.Sub(need.Value)
				set[name] = have
			}
		}
	}
}

func (c counters) clone() counters {
	out := make(counters, len(c))
	for set, m := range c {
		cp := make(map[string]resource.Quantity, len(m))
		for n, q := range m {
			cp[n] = q.DeepCopy()
		}
		out[set] = cp
	}
	return out
}

// costKey identifies a device's counter cost, to detect one partition
// type with different costs.
func costKey(cost []resourcev1.DeviceCounterConsumption) string {
	var parts []string
	for _, cc := range cost {
		for name, q := range cc.Counters {
			parts = append(parts, cc.CounterSet+"/"+name+"="+q.Value.String())
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
