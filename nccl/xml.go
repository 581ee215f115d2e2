package nccl

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrBadXML is returned (wrapped) for a topology XML NCCL would not load or that
// exceeds NCCL's limits.
var ErrBadXML = errors.New("nccl: bad topology XML")

// Limits of NCCL's XML parser (src/graph/xml.h): 16 attributes and 128 children per
// node, names and values of at most 255 characters. maxXMLNodes and maxXMLDepth
// bound what Parse accepts beyond NCCL's own per-node limits.
const (
	maxAttrs    = 16
	maxSubs     = 128
	maxStrLen   = 255
	maxXMLNodes = 4096
	maxXMLDepth = 32
)

// Attr is one attribute of an XML node, kept in order.
type Attr struct {
	Key, Value string
}

// Node is one element of NCCL's topology XML (struct ncclXmlNode): a name, ordered
// attributes and ordered children. NCCL's files hold no text content.
type Node struct {
	Name  string
	Attrs []Attr
	Subs  []*Node
}

// Get returns the value of attribute key.
func (n *Node) Get(key string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Set sets attribute key, keeping its position when it exists (xmlSetAttr).
func (n *Node) Set(key, value string) {
	for i := range n.Attrs {
		if n.Attrs[i].Key == key {
			n.Attrs[i].Value = value
			return
		}
	}
	n.Attrs = append(n.Attrs, Attr{key, value})
}

// SetInt sets an integer attribute in decimal (xmlSetAttrInt).
func (n *Node) SetInt(key string, v int) { n.Set(key, strconv.Itoa(v)) }

// Sub returns the first child named name, or nil (xmlGetSub).
func (n *Node) Sub(name string) *Node {
	for _, s := range n.Subs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Add appends a new child named name and returns it.
func (n *Node) Add(name string, attrs ...Attr) *Node {
	s := &Node{Name: name, Attrs: attrs}
	n.Subs = append(n.Subs, s)
	return s
}

// Walk calls f for n and every node below it, parents first.
func (n *Node) Walk(f func(*Node)) {
	f(n)
	for _, s := range n.Subs {
		s.Walk(f)
	}
}

// WriteXML writes the tree as ncclTopoDumpXmlRec (src/graph/xml.cc) does: two spaces
// of indentation per level, attributes in order as key="value", a childless node
// closed with "/>". NCCL writes values unescaped; so does this, and it refuses
// values NCCL's own reader could not read back (a double quote, '<' or '>', a
// newline).
func WriteXML(w io.Writer, root *Node) error {
	bw := bufio.NewWriter(w)
	if err := writeNode(bw, root, 0); err != nil {
		return err
	}
	return bw.Flush()
}

func writeNode(w *bufio.Writer, n *Node, indent int) error {
	if indent/2 > maxXMLDepth {
		return fmt.Errorf("%w: deeper than %d levels", ErrBadXML, maxXMLDepth)
	}
	if !validName(n.Name) {
		return fmt.Errorf("%w: node name %q", ErrBadXML, n.Name)
	}
	w.WriteString(strings.Repeat(" ", indent))
	w.WriteString("<" + n.Name)
	for _, a := range n.Attrs {
		if !validName(a.Key) || strings.ContainsAny(a.Value, "\"<>\n\r") || len(a.Value) > maxStrLen {
			return fmt.Errorf("%w: attribute %s=%q of <%s>", ErrBadXML, a.Key, a.Value, n.Name)
		}
		fmt.Fprintf(w, " %s=\"%s\"", a.Key, a.Value)
	}
	if len(n.Subs) == 0 {
		w.WriteString("/>\n")
		return nil
	}
	w.WriteString(">\n")
	for _, s := range n.Subs {
		if err := writeNode(w, s, indent+2); err != nil {
			return err
		}
	}
	w.WriteString(strings.Repeat(" ", indent))
	w.WriteString("</" + n.Name + ">\n")
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > maxStrLen {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseXML reads a topology or graph XML. It keeps what NCCL keeps: elements and
// their attributes in order; comments and the XML declaration are skipped. Input
// beyond NCCL's limits (attributes, children, string lengths) or maxXMLNodes nodes
// is an error wrapping ErrBadXML.
func ParseXML(r io.Reader) (*Node, error) {
	d := xml.NewDecoder(io.LimitReader(r, 4<<20))
	d.Strict = true
	var stack []*Node
	var root *Node
	count := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadXML, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			count++
			if count > maxXMLNodes {
				return nil, fmt.Errorf("%w: more than %d nodes", ErrBadXML, maxXMLNodes)
			}
			if len(stack) >= maxXMLDepth {
				return nil, fmt.Errorf("%w: deeper than %d levels", ErrBadXML, maxXMLDepth)
			}
			if len(t.Attr) > maxAttrs {
				return nil, fmt.Errorf("%w: <%s> has %d attributes, NCCL reads at most %d", ErrBadXML, t.Name.Local, len(t.Attr), maxAttrs)
			}
			n := &Node{Name: t.Name.Local}
			if len(n.Name) > maxStrLen {
				return nil, fmt.Errorf("%w: name longer than %d", ErrBadXML, maxStrLen)
			}
			for _, a := range t.Attr {
				if len(a.Name.Local) > maxStrLen || len(a.Value) > maxStrLen {
					return nil, fmt.Errorf("%w: attribute of <%s> longer than %d", ErrBadXML, n.Name, maxStrLen)
				}
				n.Attrs = append(n.Attrs, Attr{a.Name.Local, a.Value})
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, fmt.Errorf("%w: more than one top-level element", ErrBadXML)
				}
				root = n
			} else {
				p := stack[len(stack)-1]
				if len(p.Subs) >= maxSubs {
					return nil, fmt.Errorf("%w: <%s> has more than %d children", ErrBadXML, p.Name, maxSubs)
				}
				p.Subs = append(p.Subs, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if strings.TrimSpace(string(t)) != "" {
				return nil, fmt.Errorf("%w: unexpected text %.20q", ErrBadXML, string(t))
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: empty", ErrBadXML)
	}
	return root, nil
}
