module github.com/morphhost/morph/abi

// abi is its own module, kept at an old go line, so that guests built with
// older toolchains (TinyGo 0.34 accepts Go 1.19-1.23) can require it.
go 1.23
