package async

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/hashslot"
)

// Per-master epochs.
//
// On Redis Cluster <prefix>epoch lives on one master: another master that
// restarts empty and alone (no persistence, no replica taking over) leaves
// it untouched. So on a cluster each check also reads one epoch per
// master, under a hash tag whose slot that master owns: <prefix>{e<n>}:epoch
// with the smallest n that lands there, by the slot map read (CLUSTER
// SLOTS) at the same check. An epoch key found gone or changed means the
// master that owns its slot lost its data; only the vouchers with a slot
// on that master are reported and reloaded.
//
// No false alarm from a topology change: a slot migration moves the key
// with its slot (MIGRATE keeps its value), and a master left without one,
// or new, gets the next key, whose first reading is not compared with
// anything; a failover keeps it (it was replicated long ago). Nothing here
// touches the request path: the keys are read by the check that runs every
// second, in the pipeline that reads <prefix>epoch.

// maxEpochTag bounds the search for a master's epoch tag: 2^20 tags cover
// every slot many times over.
const maxEpochTag = 1 << 20

// slotOwner is one range of CLUSTER SLOTS and its master's address.
type slotOwner struct {
	from, to int
	addr     string
}

// topology is a cluster's slot map; nil outside Redis Cluster.
type topology []slotOwner

// owner returns the address of the master that owns slot, or "" when the
// map does not say (or there is no map).
func (t topology) owner(slot int) string {
	for _, r := range t {
		if r.from <= slot && slot <= r.to {
			return r.addr
		}
	}
	return ""
}

// ownerOf returns the address of the master that holds key.
func (t topology) ownerOf(key string) string { return t.owner(hashslot.Of(key)) }

// epochChange is an epoch key found gone or changed: the node holding it
// lost its data.
type epochChange struct {
	prev, cur string
	node      string // the master's address; "" outside Redis Cluster
}

// epochKeys returns the epoch keys one check reads: <prefix>epoch, then
// each master's (the first of the tags on its slots), in tag order.
func epochKeys(k layout.Keyspace, t topology) []string {
	keys := []string{k.Epoch()}
	masters := map[string]bool{}
	for _, r := range t {
		masters[r.addr] = false
	}
	left := len(masters)
	for n := 0; left > 0 && n < maxEpochTag; n++ {
		key := k.NodeEpoch(n)
		if done, ok := masters[t.ownerOf(key)]; ok && !done {
			masters[t.ownerOf(key)] = true
			keys = append(keys, key)
			left--
		}
	}
	return keys
}

// readTopology returns the cluster's slot map, as the first node that
// answers CLUSTER SLOTS sees it, or nil when the client is not a cluster
// client.
func (s *Service) readTopology(ctx context.Context) (topology, error) {
	if s.client.Mode() != rueidis.ClientModeCluster {
		return nil, nil
	}
	nodes := s.client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	var errs []error
	for _, addr := range addrs {
		n := nodes[addr]
		t, err := parseSlots(n.Do(ctx, n.B().ClusterSlots().Build()))
		if err == nil {
			return t, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, fmt.Errorf("async: CLUSTER SLOTS: %w", errors.Join(errs...))
}

// parseSlots reads a CLUSTER SLOTS reply: [from, to, [ip, port, id…],
// replicas…] per range.
func parseSlots(res rueidis.RedisResult) (topology, error) {
	entries, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	t := make(topology, len(entries))
	for i, e := range entries {
		if t[i], err = parseSlotRange(e); err != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS entry %v: %w", e, err)
		}
	}
	return t, nil
}

// parseSlotRange reads one entry of CLUSTER SLOTS.
func parseSlotRange(e rueidis.RedisMessage) (slotOwner, error) {
	f, err := e.ToArray()
	if err != nil {
		return slotOwner{}, err
	}
	if len(f) < 3 {
		return slotOwner{}, errors.New("too short")
	}
	from, err1 := f[0].AsInt64()
	to, err2 := f[1].AsInt64()
	hp, err3 := f[2].ToArray()
	if err := errors.Join(err1, err2, err3); err != nil {
		return slotOwner{}, err
	}
	if len(hp) < 2 {
		return slotOwner{}, errors.New("no master")
	}
	host, err1 := hp[0].ToString()
	port, err2 := hp[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return slotOwner{}, err
	}
	return slotOwner{from: int(from), to: int(to), addr: host + ":" + strconv.FormatInt(port, 10)}, nil
}

// readEpochKeys reads (writing the candidate where missing) every epoch
// key of t in one pipeline and returns, per node, the first key found gone
// or changed since the last check; it remembers what it read.
func (s *Service) readEpochKeys(ctx context.Context, t topology, candidate string) (map[string]epochChange, error) {
	keys := epochKeys(s.keys, t)
	execs := make([]rueidis.LuaExec, len(keys))
	for i, k := range keys {
		execs[i] = rueidis.LuaExec{Keys: []string{k}, Args: []string{candidate}}
	}
	read := make(map[string]string, len(keys))
	for i, r := range epochScript.ExecMulti(ctx, s.client, execs...) {
		res, err := r.ToArray()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("epoch.lua answered %v", res)
		}
		if err != nil {
			return nil, fmt.Errorf("async: epoch %s: %w", keys[i], err)
		}
		if read[keys[i]], err = res[1].ToString(); err != nil {
			return nil, fmt.Errorf("async: epoch %s: %w", keys[i], err)
		}
	}
	changes := map[string]epochChange{}
	for _, k := range keys { // <prefix>epoch first: its change names the loss
		prev, cur := s.epoch.seen[k], read[k]
		if prev == "" || prev == cur {
			continue
		}
		node := t.ownerOf(k)
		if _, ok := changes[node]; !ok {
			changes[node] = epochChange{prev: prev, cur: cur, node: node}
		}
	}
	// Keys no longer read (their slot moved to a master with a smaller
	// tag) are forgotten: read again later, they count as first seen.
	s.epoch.seen = read
	s.epoch.current = read[s.keys.Epoch()]
	return changes, nil
}

// vouchersOn returns, of the vouchers kept, those with a shard on node (all
// of them when node is "": outside Redis Cluster) and the orders counted
// for each.
func (s *Service) vouchersOn(node string, t topology, kept map[int64]*local, counted map[int64]int64) map[int64]int64 {
	hit := map[int64]int64{}
	for id, l := range kept {
		for _, vk := range l.keysOf(s.keys, id) {
			if node == "" || t.ownerOf(vk.Meta) == node {
				hit[id] = counted[id]
				break
			}
		}
	}
	return hit
}

// reRegister puts back in the registry the vouchers kept, other than
// those hit (their reload registers them), whose keys are loaded: when
// the registry was on the master that lost its data, the consumers would
// stop reading their streams, and the orders there would wait for
// reconcile.
func (s *Service) reRegister(ctx context.Context, kept map[int64]*local, hit map[int64]int64) {
	var members []string
	var cmds rueidis.Commands
	for id, l := range kept {
		if _, ok := hit[id]; ok {
			continue
		}
		for _, vk := range l.keysOf(s.keys, id) {
			members = append(members, vk.Body)
			cmds = append(cmds, s.client.B().Exists().Key(vk.Meta).Build())
		}
	}
	var loaded []string
	for i, r := range s.client.DoMulti(ctx, cmds...) {
		if n, err := r.AsInt64(); err != nil {
			s.log.Error("async: registering a voucher again after Redis lost the registry; run flashsale reconcile --fix", "shard", members[i], "err", err)
		} else if n == 1 {
			loaded = append(loaded, members[i])
		}
	}
	if len(loaded) == 0 {
		return
	}
	if err := s.client.Do(ctx, s.client.B().Sadd().Key(s.keys.Registry()).Member(loaded...).Build()).Error(); err != nil {
		s.log.Error("async: registering vouchers again after Redis lost the registry; run flashsale reconcile --fix", "err", err)
	}
}
