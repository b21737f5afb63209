package host

import (
	"context"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
)

// One path serves every isolation mode: a call takes an idle instance of
// its key from p.free, or instantiates one, and gives it back there. The
// mode only chooses the key (poolKey): "" for pooled, the session id for
// session; in call mode no instance is kept. p.free keeps the order the
// instances came back in, so in session mode trim evicts from its front:
// the instances idle for Limits.SessionIdle, then the longest idle until no
// more than Limits.MaxSessions keys have idle instances. A session's
// lookup is by its key, in constant time however many sessions are idle
// (see idleList). The instance describe ran on at load is a spare, which
// holds no session's state: the first call that finds no instance of its
// own key takes it (so a one-session run instantiates once, as in pooled
// mode).

// defaultIsolation is the mode of a plugin that configures none: per session
// when it has an enabled middleware hook (middleware may keep state about
// the session it observes), pooled otherwise.
func defaultIsolation(hooks []string) string {
	for _, h := range hooks {
		if _, ok := abi.MiddlewareExports[h]; ok {
			return IsolationSession
		}
	}
	return IsolationPooled
}

// poolKey is the free list a call on ctx draws from and returns to; reuse is
// false in call mode, where no instance outlives its call.
func (p *Plugin) poolKey(ctx context.Context) (key string, reuse bool) {
	switch p.mode {
	case IsolationCall:
		return "", false
	case IsolationSession:
		if rc := engine.RunContext(ctx); rc != nil {
			return rc.SessionID, true
		}
	}
	return "", true
}

// get takes the most recently idle instance of ctx's key, or instantiates one.
func (p *Plugin) get(ctx context.Context) (*instance, error) {
	key, reuse := p.poolKey(ctx)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	evicted := p.trim()
	var inst *instance
	if reuse {
		inst = p.free.find(key)
	}
	if inst != nil {
		p.free.take(inst)
		inst.key, inst.spare = key, false
	}
	p.mu.Unlock()
	p.evict(evicted)
	if inst != nil {
		return inst, nil
	}
	inst, err := p.instantiate(ctx)
	if err != nil {
		return nil, err
	}
	inst.key, inst.reuse = key, reuse
	return inst, nil
}

// spares marks the idle instances, those describe ran on, as spares.
func (p *Plugin) spares() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free.markSpares()
}

// put gives inst back to the free list of its key, or closes it, without
// morph_destroy, in call mode and after Close.
func (p *Plugin) put(inst *instance) {
	p.mu.Lock()
	if p.closed || !inst.reuse {
		p.mu.Unlock()
		inst.close()
		return
	}
	p.free.add(inst)
	var evicted []*instance
	// The idle clock serves session mode's eviction (and describe's
	// instance, before the mode is known): a clock read costs 50-100 ns
	// here, a sixth of a small call.
	if p.mode != IsolationPooled {
		inst.since = p.now()
		evicted = p.trim()
		p.schedule()
	}
	p.mu.Unlock()
	p.evict(evicted)
}

// trim removes, in session mode, the idle instances due for eviction and
// returns them for evict; p.mu is held and the plugin is open.
func (p *Plugin) trim() []*instance {
	if p.mode != IsolationSession {
		return nil
	}
	now := p.now()
	var out []*instance
	for inst := p.free.order.head; inst != nil; inst = p.free.order.head {
		if now.Sub(inst.since) < p.limits.SessionIdle && p.free.sessions() <= p.limits.MaxSessions {
			break
		}
		p.free.take(inst)
		out = append(out, inst)
	}
	if len(out) > 0 {
		p.evicting.Add(1) // under p.mu with the plugin open: before Close waits
	}
	return out
}

// evict calls morph_destroy on the instances trim removed and closes them,
// in the background, each holding an instance slot while its destroy runs
// and it closes (see Close); the plugin's closing cancels it.
func (p *Plugin) evict(insts []*instance) {
	if len(insts) == 0 {
		return
	}
	go func() {
		defer p.evicting.Done()
		for i, inst := range insts {
			select {
			case p.slots <- struct{}{}:
			case <-p.closing.Done(): // Close releases the rest
				p.mu.Lock()
				p.unevicted = append(p.unevicted, insts[i:]...)
				p.mu.Unlock()
				return
			}
			p.destroy(p.closing, []*instance{inst})
			inst.close()
			<-p.slots
		}
	}()
}

// schedule arms a timer for the expiry of the longest idle instance, so
// that idle sessions are evicted even when no call comes; p.mu is held.
func (p *Plugin) schedule() {
	oldest := p.free.order.head
	if p.mode != IsolationSession || p.sweeper != nil || oldest == nil {
		return
	}
	d := max(oldest.since.Add(p.limits.SessionIdle).Sub(p.now()), 10*time.Millisecond)
	p.sweeper = time.AfterFunc(d, p.sweep)
}

// sweep is the timer's trim.
func (p *Plugin) sweep() {
	p.mu.Lock()
	p.sweeper = nil
	var evicted []*instance
	if !p.closed {
		evicted = p.trim()
		p.schedule()
	}
	p.mu.Unlock()
	p.evict(evicted)
}
