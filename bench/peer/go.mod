module github.com/morphhost/morph/bench/peer

go 1.26.0

require github.com/2389-research/tracker v0.5.0

require github.com/awalterschulze/gographviz v2.0.3+incompatible // indirect
