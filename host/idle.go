package host

// idleList is a plugin's idle instances, indexed so that each operation a call
// makes on it is O(1) whatever the number of live sessions (BENCHMARKS.md,
// Sessions: a linear scan of 10,000 idle instances was 43% of the CPU): one
// list in the order the instances came back, which eviction takes from its
// front, and one list per key, whose back is the key's most recently idle
// instance. Both lists are intrusive (the links are on the instance), so
// that neither a get nor a put allocates or shifts a slice. The spares
// (describe's instance) are also listed apart, for the first call that finds
// no instance of its own key. The key "" (session mode's calls outside a
// run) has its list outside the map: a call, which empties and refills it
// in turn, then costs no map operation and no allocation (they made a
// call to a small guest half again as slow). Pooled mode keeps its idle
// instances apart (see shards): here is at most describe's, from before the
// mode was known. p.mu guards it.
type idleList struct {
	order  chain             // every idle instance, oldest first
	blank  chain             // idle instances of the key ""
	keys   map[string]*chain // idle instances of the other keys, none empty
	spares []*instance       // idle spares, also in order and keys: a few at most
	n      int               // idle instances
}

// The links of an instance: its place in idleList.order, and in its key's list.
const (
	inOrder = iota
	inKey
)

// link is an instance's place in one chain.
type link struct{ prev, next *instance }

// chain is an intrusive doubly-linked list of instances through their
// links[at].
type chain struct {
	head, tail *instance
	at         int
}

// push makes inst the chain's tail.
func (c *chain) push(inst *instance) {
	l := &inst.links[c.at]
	l.prev, l.next = c.tail, nil
	if c.tail != nil {
		c.tail.links[c.at].next = inst
	} else {
		c.head = inst
	}
	c.tail = inst
}

// remove unlinks inst, which is on the chain.
func (c *chain) remove(inst *instance) {
	l := &inst.links[c.at]
	if l.prev != nil {
		l.prev.links[c.at].next = l.next
	} else {
		c.head = l.next
	}
	if l.next != nil {
		l.next.links[c.at].prev = l.prev
	} else {
		c.tail = l.prev
	}
	*l = link{}
}

// newIdle is an empty idleList.
func newIdle() idleList {
	return idleList{order: chain{at: inOrder}, blank: chain{at: inKey}, keys: map[string]*chain{}}
}

// sessions is the number of keys with idle instances.
func (d *idleList) sessions() int {
	if d.blank.head != nil {
		return len(d.keys) + 1
	}
	return len(d.keys)
}

// of is the list of key, nil if none of its instances is idle.
func (d *idleList) of(key string) *chain {
	if key == "" {
		return &d.blank
	}
	return d.keys[key]
}

// add makes inst the most recently idle instance, of its key and of all.
func (d *idleList) add(inst *instance) {
	d.n++
	d.order.push(inst)
	c := d.of(inst.key)
	if c == nil {
		c = &chain{at: inKey}
		d.keys[inst.key] = c
	}
	c.push(inst)
	if inst.spare {
		d.spares = append(d.spares, inst)
	}
}

// take removes inst from every list it is on.
func (d *idleList) take(inst *instance) {
	d.n--
	d.order.remove(inst)
	c := d.of(inst.key)
	if c.remove(inst); c.head == nil && inst.key != "" {
		delete(d.keys, inst.key)
	}
	if inst.spare {
		i := len(d.spares) - 1
		for d.spares[i] != inst {
			i--
		}
		d.spares = append(d.spares[:i], d.spares[i+1:]...)
	}
}

// find is the most recently idle instance of key, else the most recent
// spare, else nil; it stays idle until take.
func (d *idleList) find(key string) *instance {
	if c := d.of(key); c != nil && c.tail != nil {
		return c.tail
	}
	if n := len(d.spares); n > 0 {
		return d.spares[n-1]
	}
	return nil
}

// markSpares makes every idle instance a spare.
func (d *idleList) markSpares() {
	for inst := d.order.head; inst != nil; inst = inst.links[inOrder].next {
		if !inst.spare {
			inst.spare = true
			d.spares = append(d.spares, inst)
		}
	}
}

// all is the idle instances, oldest first, in a new slice.
func (d *idleList) all() []*instance {
	out := make([]*instance, 0, d.n)
	for inst := d.order.head; inst != nil; inst = inst.links[inOrder].next {
		out = append(out, inst)
	}
	return out
}
