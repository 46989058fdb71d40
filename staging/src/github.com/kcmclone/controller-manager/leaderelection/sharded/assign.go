// Package sharded shares a controller manager's controllers among its
// replicas: every controller (or group of controllers that must move
// together) has its own Lease, and each replica holds about its fair share.
package sharded

import (
	"hash/fnv"
	"sort"
	"time"
)

// WeightedUnit is something that holds one Lease: a controller, or a group
// of controllers that must run in the same process.
type WeightedUnit struct {
	Name string
	// Weight is the unit's relative amount of work; at least 1.
	Weight int
}

// score ranks member for unit; the highest score is the unit's first choice
// (rendezvous hashing), so most units keep their member when another joins.
func score(unit, member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(unit))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	// fnv's low bits mix poorly for short inputs; a final avalanche fixes it.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func weightOf(u WeightedUnit) int {
	if u.Weight < 1 {
		return 1
	}
	return u.Weight
}

// Target assigns every unit to one member: rendezvous hashing bounded by
// load, so that no member gets much more than its fair share of the total
// weight. The result depends only on the sets given, never on their order,
// so every replica that sees the same members computes the same assignment.
func Target(units []WeightedUnit, members []string) map[string]string {
	return stickyTarget(units, members, nil)
}

// stickyTarget is Target, except that a unit held by a live member stays
// with it while that member is within the load limit: when a replica dies,
// only its units move, and the survivors' running controllers do not.
// holders maps a unit to the member holding it now.
func stickyTarget(units []WeightedUnit, members []string, holders map[string]string) map[string]string {
	out := make(map[string]string, len(units))
	if len(members) == 0 {
		return out
	}
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	us := append([]WeightedUnit(nil), units...)
	sort.Slice(us, func(i, j int) bool {
		if weightOf(us[i]) != weightOf(us[j]) {
			return weightOf(us[i]) > weightOf(us[j])
		}
		return us[i].Name < us[j].Name
	})
	total := 0
	maxW := 0
	for _, u := range us {
		total += weightOf(u)
		maxW = max(maxW, weightOf(u))
	}
	// A member may exceed the even share by half the heaviest unit before
	// units spill to their next choice.
	limit := (total+len(ms)-1)/len(ms) + maxW/2
	load := make(map[string]int, len(ms))
	for _, u := range us {
		if h, ok := holders[u.Name]; ok && contains(ms, h) && load[h]+weightOf(u) <= limit {
			out[u.Name] = h
			load[h] += weightOf(u)
		}
	}
	for _, u := range us {
		if _, kept := out[u.Name]; kept {
			continue
		}
		w := weightOf(u)
		ranked := append([]string(nil), ms...)
		sort.Slice(ranked, func(i, j int) bool {
			si, sj := score(u.Name, ranked[i]), score(u.Name, ranked[j])
			if si != sj {
				return si > sj
			}
			return ranked[i] < ranked[j]
		})
		chosen := ""
		for _, m := range ranked {
			if load[m]+w <= limit {
				chosen = m
				break
			}
		}
		if chosen == "" {
			// Everyone is at the limit: the least loaded, in rank order.
			chosen = ranked[0]
			for _, m := range ranked[1:] {
				if load[m] < load[chosen] {
					chosen = m
				}
			}
		}
		out[u.Name] = chosen
		load[chosen] += w
	}
	return out
}

// Policy holds the hysteresis knobs of Decide.
type Policy struct {
	// OrphanGrace is how long a free unit assigned to another member waits
	// for that member before anyone else may take it.
	OrphanGrace time.Duration
	// MinHold is the least time a unit is held before it is given away.
	MinHold time.Duration
	// Margin is how far over its fair share (a fraction of it) a replica
	// must be before it gives units away.
	Margin float64
}

// UnitState is what a replica knows of one unit's Lease.
type UnitState struct {
	// Holder is the identity holding a valid Lease, "" when the Lease is
	// free (absent, released or expired).
	Holder string
	// FreeSince is when the Lease was first seen free (valid when Holder is "").
	FreeSince time.Time
	// HeldSince is when this replica acquired it (valid when Holder is Self).
	HeldSince time.Time
}

// View is one replica's picture of the cluster at Now.
type View struct {
	Self    string
	Members []string
	Units   []WeightedUnit
	States  map[string]UnitState
	Now     time.Time
}

// Decision lists the units to campaign for and the units to give away.
type Decision struct {
	Acquire []string
	Release []string
}

// Decide applies the sharing rules to a view:
//   - a free unit assigned to Self is taken at once; one assigned to
//     someone else is taken only after OrphanGrace (its member is gone or
//     does not run it);
//   - held units are given away only while Self holds more than its fair
//     share by Margin, only those assigned to another live member, only
//     after MinHold, newest first and no further than the fair share, so
//     replicas that come and go cause no ping-pong.
func Decide(v View, p Policy) Decision {
	var d Decision
	members := append([]string(nil), v.Members...)
	if !contains(members, v.Self) {
		members = append(members, v.Self)
	}
	holders := map[string]string{}
	for name, st := range v.States {
		if contains(members, st.Holder) {
			holders[name] = st.Holder
		}
	}
	target := stickyTarget(v.Units, members, holders)
	total, mine := 0, 0
	for _, u := range v.Units {
		total += weightOf(u)
		if v.States[u.Name].Holder == v.Self {
			mine += weightOf(u)
		}
	}
	fair := float64(total) / float64(len(members))
	over := float64(mine) > fair*(1+p.Margin)

	units := append([]WeightedUnit(nil), v.Units...)
	sort.Slice(units, func(i, j int) bool { return units[i].Name < units[j].Name })
	var releasable []WeightedUnit
	for _, u := range units {
		st := v.States[u.Name]
		switch st.Holder {
		case "":
			if target[u.Name] == v.Self || v.Now.Sub(st.FreeSince) >= p.OrphanGrace {
				d.Acquire = append(d.Acquire, u.Name)
			}
		case v.Self:
			if over && target[u.Name] != v.Self && v.Now.Sub(st.HeldSince) >= p.MinHold {
				releasable = append(releasable, u)
			}
		}
	}
	// Newest first, so units held longest stay put, and only down to the
	// fair share.
	sort.SliceStable(releasable, func(i, j int) bool {
		return v.States[releasable[i].Name].HeldSince.After(v.States[releasable[j].Name].HeldSince)
	})
	for _, u := range releasable {
		if float64(mine-weightOf(u)) < fair {
			continue
		}
		mine -= weightOf(u)
		d.Release = append(d.Release, u.Name)
	}
	return d
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
