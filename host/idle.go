package host

import "time"

// idleList is a plugin's kept instances, by the session they belong to (see
// isolation.go), indexed so that each operation a call makes on it is O(1)
// whatever the number of open sessions (BENCHMARKS.md, Sessions: a linear
// scan of 10,000 idle instances was 43% of the CPU): a map of the open
// sessions by key, each with its idle instances, and one list of the
// sessions with no call in flight, least recently active first, which
// expiry takes from the front. The list is intrusive (the links are on the
// session), so that neither a get nor a put allocates. The spares
// (describe's instance) are listed apart, for the first call of a session
// that has no instance of its own. The session "" (calls outside a run, and
// describe) is kept outside the map: it is no session an operator opened,
// and is never counted against Limits.MaxSessions. Pooled mode keeps its
// idle instances apart (see shards): here is at most describe's, from
// before the mode was known. p.mu guards it.
type idleList struct {
	order  sessionChain        // sessions with no call in flight, least recently active first
	keys   map[string]*session // the open sessions but ""
	blank  *session            // the session ""
	spares []*instance         // idle spares, also in blank.idle: a few at most
	n      int                 // idle instances
	last   *instance           // the instance last given back, while it is idle (IdleMemory)
}

// session is what a plugin keeps of one session: its idle instances and its
// calls in flight. It is open from its first call until it ends
// (Plugin.EndSession) or expires (no call for Limits.SessionIdle); while
// open, its instances are its own.
type session struct {
	key        string
	idle       []*instance // its idle instances, the most recently idle last: one, unless its calls ran at once
	busy       int         // its calls in flight
	since      time.Time   // when busy last fell to 0
	prev, next *session    // its place in idleList.order, while busy is 0
	listed     bool        // in idleList.order
	// told is why the session's state was lost (abi.Replaced*), while its
	// next fresh instance has not yet been told (morph_instance_replaced).
	told  string
	ended bool // ended with calls in flight: their instances are released as they end
	// expect is, for a session whose calls carry counts
	// (WithSessionCalls), the most its next call's count can be if no call
	// of it was served elsewhere since: one past the last count served here.
	expect int
}

// sessionChain is an intrusive doubly-linked list of sessions.
type sessionChain struct{ head, tail *session }

// push makes s the chain's tail.
func (c *sessionChain) push(s *session) {
	s.prev, s.next, s.listed = c.tail, nil, true
	if c.tail != nil {
		c.tail.next = s
	} else {
		c.head = s
	}
	c.tail = s
}

// remove unlinks s, which is on the chain.
func (c *sessionChain) remove(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		c.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		c.tail = s.prev
	}
	s.prev, s.next, s.listed = nil, nil, false
}

// newIdle is an empty idleList.
func newIdle() idleList {
	return idleList{keys: map[string]*session{}, blank: &session{}}
}

// open is the number of open sessions, "" aside.
func (d *idleList) open() int { return len(d.keys) }

// of is the open session of key, nil if none.
func (d *idleList) of(key string) *session {
	if key == "" {
		return d.blank
	}
	return d.keys[key]
}

// opening opens the session of key, which is not open.
func (d *idleList) opening(key string) *session {
	s := &session{key: key}
	d.keys[key] = s
	return s
}

// begin counts a call of s in.
func (d *idleList) begin(s *session) {
	if s.busy++; s.listed {
		d.order.remove(s)
	}
}

// finish counts a call of s out, at now.
func (d *idleList) finish(s *session, now time.Time) {
	if s.busy--; s.busy == 0 && !s.ended {
		s.since = now
		d.order.push(s)
	}
}

// add makes inst the most recently idle instance of s.
func (d *idleList) add(s *session, inst *instance) {
	d.n++
	inst.ses = s
	s.idle = append(s.idle, inst)
	if inst.spare {
		d.spares = append(d.spares, inst)
	}
	d.last = inst
}

// take removes inst, which is idle, from the lists.
func (d *idleList) take(inst *instance) {
	d.n--
	inst.ses.idle = cut(inst.ses.idle, inst)
	if inst.spare {
		d.spares = cut(d.spares, inst)
	}
	if d.last == inst {
		d.last = nil
	}
}

// cut removes inst from list, searching from its end, where the instance a
// call takes almost always is.
func cut(list []*instance, inst *instance) []*instance {
	i := len(list) - 1
	for list[i] != inst {
		i--
	}
	copy(list[i:], list[i+1:])
	list[len(list)-1] = nil
	return list[:len(list)-1]
}

// find is the most recently idle instance of s, else the most recent
// spare, else nil; it stays idle until take.
func (d *idleList) find(s *session) *instance {
	if n := len(s.idle); n > 0 {
		return s.idle[n-1]
	}
	if n := len(d.spares); n > 0 {
		return d.spares[n-1]
	}
	return nil
}

// end closes s (the session "" only empties) and returns its idle
// instances, taken.
func (d *idleList) end(s *session) []*instance {
	if s.listed {
		d.order.remove(s)
	}
	if s != d.blank {
		delete(d.keys, s.key)
	}
	out := make([]*instance, len(s.idle))
	copy(out, s.idle)
	for _, inst := range out {
		d.take(inst)
	}
	return out
}

// markSpares makes every idle instance a spare.
func (d *idleList) markSpares() {
	for _, inst := range d.all() {
		if !inst.spare {
			inst.spare = true
			d.spares = append(d.spares, inst)
		}
	}
}

// all is the idle instances, in a new slice.
func (d *idleList) all() []*instance {
	out := make([]*instance, 0, d.n)
	out = append(out, d.blank.idle...)
	for _, s := range d.keys {
		out = append(out, s.idle...)
	}
	return out
}

// lostSessions are the sessions that expired while they had state, the
// most recent ones up to a cap (Limits.MaxSessions): a later call of one is
// a session that went on after it lost its instance, which is told
// (morph_instance_replaced). A session that ends is forgotten. p.mu guards
// it.
type lostSessions struct {
	reason map[string]lostEntry
	ring   []lostKey // in the order they were lost, a ring from next
	next   int
	seq    uint64
}

type lostEntry struct {
	reason string
	seq    uint64
}

type lostKey struct {
	key string
	seq uint64
}

// add remembers key, lost for reason, forgetting the oldest beyond max,
// whose key it returns (forgot), unless it was taken or lost again since.
func (l *lostSessions) add(key, reason string, max int) (forgot string, ok bool) {
	if l.reason == nil {
		l.reason = map[string]lostEntry{}
	}
	l.seq++
	l.reason[key] = lostEntry{reason, l.seq}
	if len(l.ring) < max {
		l.ring = append(l.ring, lostKey{key, l.seq})
		return "", false
	}
	old := l.ring[l.next]
	if e, found := l.reason[old.key]; found && e.seq == old.seq { // not since taken, nor lost again
		delete(l.reason, old.key)
		forgot, ok = old.key, true
	}
	l.ring[l.next] = lostKey{key, l.seq}
	l.next = (l.next + 1) % len(l.ring)
	return forgot, ok
}

// take forgets key and returns why it was lost, "" if it was not.
func (l *lostSessions) take(key string) string {
	e, ok := l.reason[key]
	if !ok {
		return ""
	}
	delete(l.reason, key)
	return e.reason
}

// each calls f on each session remembered, the least recently lost first.
func (l *lostSessions) each(f func(key, reason string)) {
	for i := range l.ring {
		k := l.ring[(l.next+i)%len(l.ring)]
		if e, found := l.reason[k.key]; found && e.seq == k.seq {
			f(k.key, e.reason)
		}
	}
}
