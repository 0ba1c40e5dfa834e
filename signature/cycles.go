package signature

import "strings"

// A $ref cycle that consumes no data (a chain of $ref, $dynamicRef, allOf,
// anyOf, oneOf, not, if/then/else and dependentSchemas, whose schemas apply
// to the value itself, that leads back to itself without passing
// through properties, additionalProperties, items or prefixItems) would make checking recurse
// forever on any value: the schema has no finite meaning. Compile finds
// every such cycle and, closed world, makes each node on it match no
// value, reporting the cycle (Unsupported, keyword "$ref"). Calls checked
// against it are H3 with a reason naming the cycle. A recursive schema
// whose recursion passes through data (a tree node whose kids.items is
// {"$ref":"#/$defs/node"}) is not a cycle here: checking it recurses once
// per level of the data, and the data's depth is bounded by the parser.

// succ returns the nodes checked on the same value as n.
func (n *node) succ(out []*node) []*node {
	out = out[:0]
	if n.never {
		return out
	}
	if n.ref != nil {
		out = append(out, n.ref)
	}
	if n.x.dyn != nil {
		out = append(out, n.x.dyn.initial)
		out = append(out, n.x.dyn.targets...)
	}
	out = append(out, n.allOf...)
	out = append(out, n.anyOf...)
	out = append(out, n.oneOf...)
	for _, b := range [...]*node{n.not, n.x.ifN, n.x.thenN, n.x.elseN} {
		if b != nil {
			out = append(out, b)
		}
	}
	for _, d := range n.x.depSchemas {
		out = append(out, d.n)
	}
	return out
}

// cycles finds the strongly connected components of the same-value graph
// (Tarjan's algorithm, iterative: a chain of $refs can be as long as the
// schema) and marks every node of a cyclic one. Only a $ref can lead back
// to a node already built: without one the graph is a tree.
func (c *compiler) cycles() {
	if len(c.refs) == 0 {
		return
	}
	num := make(map[*node]int, len(c.all))
	low := make(map[*node]int, len(c.all))
	on := make(map[*node]bool)
	var stack []*node
	type frame struct {
		n    *node
		succ []*node
		next int
	}
	counter := 0
	for _, start := range c.all {
		if _, seen := num[start]; seen {
			continue
		}
		var calls []frame
		visit := func(n *node) {
			num[n], low[n] = counter, counter
			counter++
			stack = append(stack, n)
			on[n] = true
			calls = append(calls, frame{n: n, succ: n.succ(nil)})
		}
		visit(start)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.next < len(f.succ) {
				w := f.succ[f.next]
				f.next++
				if _, seen := num[w]; !seen {
					visit(w)
				} else if on[w] {
					low[f.n] = min(low[f.n], num[w])
				}
				continue
			}
			n := f.n
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].n
				low[p] = min(low[p], low[n])
			}
			if low[n] != num[n] {
				continue
			}
			// n roots a component: pop it.
			i := len(stack) - 1
			for stack[i] != n {
				i--
			}
			comp := stack[i:]
			stack = stack[:i]
			for _, m := range comp {
				on[m] = false
			}
			if len(comp) > 1 || selfLoop(n) {
				c.breakCycle(comp)
			}
		}
	}
}

func selfLoop(n *node) bool {
	for _, s := range n.succ(nil) {
		if s == n {
			return true
		}
	}
	return false
}

// breakCycle reports one cycle of the component and marks its nodes.
func (c *compiler) breakCycle(comp []*node) {
	in := make(map[*node]bool, len(comp))
	for _, m := range comp {
		in[m] = true
	}
	first := comp[0] // the first found: the same for the same schema
	// The shortest way from first back to itself within the component.
	prev := map[*node]*node{}
	queue := []*node{first}
	var last *node
	for len(queue) > 0 && last == nil {
		n := queue[0]
		queue = queue[1:]
		for _, s := range n.succ(nil) {
			if !in[s] {
				continue
			}
			if s == first {
				last = n
				break
			}
			if _, ok := prev[s]; !ok {
				prev[s] = n
				queue = append(queue, s)
			}
		}
	}
	path := []*node{first}
	for n := last; n != first && n != nil; n = prev[n] {
		path = append(path, n)
	}
	var names []string
	names = append(names, "#"+c.at[first].String())
	for i := len(path) - 1; i >= 1; i-- {
		names = append(names, "#"+c.at[path[i]].String())
	}
	names = append(names, "#"+c.at[first].String())
	why := "reference cycle that consumes no data: " + strings.Join(names, " -> ")
	c.report(c.at[first], "$ref", why+"; it matches no value")
	for _, m := range comp {
		m.never, m.why = true, "schema "+why
		m.has = m.summarize()
	}
}
