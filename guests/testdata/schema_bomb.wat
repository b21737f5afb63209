;; A plugin whose tools' parameters schemas attack the sampler of
;; `morph plugin test` (host.SampleParams): minLength 9e18, maxLength 1e308,
;; minItems 1e10, minProperties 1e9, $refs fanning out to 16^6 copies of
;; a const, a fanning $ref cycle, an integer of at least 1e308, a pattern no
;; sample matches. Each must be reported, never crash or hang the host.
;; morph_call_tool answers {"output":"ok"} to anything.
(module
  (memory (export "memory") 1)
  (func (export "morph_abi_v1"))
  ;; one input at a time: always at 8192, growing memory to fit
  (func (export "morph_alloc") (param $n i32) (result i32)
    (local $need i32)
    (local.set $need (i32.add (i32.const 8192) (local.get $n)))
    (if (i32.gt_u (local.get $need) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get $n) (i32.const 65536)) (i32.const 1))) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 8192))
  ;; the manifest, 5176 bytes
  (data (i32.const 16)
    "{\"name\":\"schema-bomb\",\"version\":\"1\",\"abi_version\":1,\"tools\":[{\"name\":\"long_string\",\"description\""
    ":\"minLength 9e18: strings.Repeat of 9e18 bytes\",\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":"
    "{\"type\":\"string\",\"minLength\":9e+18}},\"required\":[\"s\"]}},{\"name\":\"cut_string\",\"description\":\"maxL"
    "ength 1e308: a slice bound out of range\",\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\""
    ":\"string\",\"maxLength\":1e+308}},\"required\":[\"s\"]}},{\"name\":\"many_items\",\"description\":\"minItems 1"
    "e10: ten billion items\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"minItem"
    "s\":10000000000.0,\"items\":{\"type\":\"integer\"}}},\"required\":[\"a\"]}},{\"name\":\"many_props\",\"descripti"
    "on\":\"minProperties 1e9\",\"parameters\":{\"type\":\"object\",\"minProperties\":1000000000.0,\"additionalPr"
    "operties\":{\"type\":\"string\"}}},{\"name\":\"fan_out\",\"description\":\"$refs fanning out to 16^6 copies "
    "of a 256-byte const\",\"parameters\":{\"$ref\":\"#/$defs/l0\",\"$defs\":{\"l0\":{\"type\":\"object\",\"propertie"
    "s\":{\"p0\":{\"$ref\":\"#/$defs/l1\"},\"p1\":{\"$ref\":\"#/$defs/l1\"},\"p2\":{\"$ref\":\"#/$defs/l1\"},\"p3\":{\"$ref"
    "\":\"#/$defs/l1\"},\"p4\":{\"$ref\":\"#/$defs/l1\"},\"p5\":{\"$ref\":\"#/$defs/l1\"},\"p6\":{\"$ref\":\"#/$defs/l1\"}"
    ",\"p7\":{\"$ref\":\"#/$defs/l1\"},\"p8\":{\"$ref\":\"#/$defs/l1\"},\"p9\":{\"$ref\":\"#/$defs/l1\"},\"p10\":{\"$ref\":"
    "\"#/$defs/l1\"},\"p11\":{\"$ref\":\"#/$defs/l1\"},\"p12\":{\"$ref\":\"#/$defs/l1\"},\"p13\":{\"$ref\":\"#/$defs/l1\""
    "},\"p14\":{\"$ref\":\"#/$defs/l1\"},\"p15\":{\"$ref\":\"#/$defs/l1\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\","
    "\"p5\",\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l1\":{\"type\":\"object\",\"properties"
    "\":{\"p0\":{\"$ref\":\"#/$defs/l2\"},\"p1\":{\"$ref\":\"#/$defs/l2\"},\"p2\":{\"$ref\":\"#/$defs/l2\"},\"p3\":{\"$ref\""
    ":\"#/$defs/l2\"},\"p4\":{\"$ref\":\"#/$defs/l2\"},\"p5\":{\"$ref\":\"#/$defs/l2\"},\"p6\":{\"$ref\":\"#/$defs/l2\"},"
    "\"p7\":{\"$ref\":\"#/$defs/l2\"},\"p8\":{\"$ref\":\"#/$defs/l2\"},\"p9\":{\"$ref\":\"#/$defs/l2\"},\"p10\":{\"$ref\":\""
    "#/$defs/l2\"},\"p11\":{\"$ref\":\"#/$defs/l2\"},\"p12\":{\"$ref\":\"#/$defs/l2\"},\"p13\":{\"$ref\":\"#/$defs/l2\"}"
    ",\"p14\":{\"$ref\":\"#/$defs/l2\"},\"p15\":{\"$ref\":\"#/$defs/l2\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\",\""
    "p5\",\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l2\":{\"type\":\"object\",\"properties\""
    ":{\"p0\":{\"$ref\":\"#/$defs/l3\"},\"p1\":{\"$ref\":\"#/$defs/l3\"},\"p2\":{\"$ref\":\"#/$defs/l3\"},\"p3\":{\"$ref\":"
    "\"#/$defs/l3\"},\"p4\":{\"$ref\":\"#/$defs/l3\"},\"p5\":{\"$ref\":\"#/$defs/l3\"},\"p6\":{\"$ref\":\"#/$defs/l3\"},\""
    "p7\":{\"$ref\":\"#/$defs/l3\"},\"p8\":{\"$ref\":\"#/$defs/l3\"},\"p9\":{\"$ref\":\"#/$defs/l3\"},\"p10\":{\"$ref\":\"#"
    "/$defs/l3\"},\"p11\":{\"$ref\":\"#/$defs/l3\"},\"p12\":{\"$ref\":\"#/$defs/l3\"},\"p13\":{\"$ref\":\"#/$defs/l3\"},"
    "\"p14\":{\"$ref\":\"#/$defs/l3\"},\"p15\":{\"$ref\":\"#/$defs/l3\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\",\"p"
    "5\",\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l3\":{\"type\":\"object\",\"properties\":"
    "{\"p0\":{\"$ref\":\"#/$defs/l4\"},\"p1\":{\"$ref\":\"#/$defs/l4\"},\"p2\":{\"$ref\":\"#/$defs/l4\"},\"p3\":{\"$ref\":\""
    "#/$defs/l4\"},\"p4\":{\"$ref\":\"#/$defs/l4\"},\"p5\":{\"$ref\":\"#/$defs/l4\"},\"p6\":{\"$ref\":\"#/$defs/l4\"},\"p"
    "7\":{\"$ref\":\"#/$defs/l4\"},\"p8\":{\"$ref\":\"#/$defs/l4\"},\"p9\":{\"$ref\":\"#/$defs/l4\"},\"p10\":{\"$ref\":\"#/"
    "$defs/l4\"},\"p11\":{\"$ref\":\"#/$defs/l4\"},\"p12\":{\"$ref\":\"#/$defs/l4\"},\"p13\":{\"$ref\":\"#/$defs/l4\"},\""
    "p14\":{\"$ref\":\"#/$defs/l4\"},\"p15\":{\"$ref\":\"#/$defs/l4\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\",\"p5"
    "\",\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l4\":{\"type\":\"object\",\"properties\":{"
    "\"p0\":{\"$ref\":\"#/$defs/l5\"},\"p1\":{\"$ref\":\"#/$defs/l5\"},\"p2\":{\"$ref\":\"#/$defs/l5\"},\"p3\":{\"$ref\":\"#"
    "/$defs/l5\"},\"p4\":{\"$ref\":\"#/$defs/l5\"},\"p5\":{\"$ref\":\"#/$defs/l5\"},\"p6\":{\"$ref\":\"#/$defs/l5\"},\"p7"
    "\":{\"$ref\":\"#/$defs/l5\"},\"p8\":{\"$ref\":\"#/$defs/l5\"},\"p9\":{\"$ref\":\"#/$defs/l5\"},\"p10\":{\"$ref\":\"#/$"
    "defs/l5\"},\"p11\":{\"$ref\":\"#/$defs/l5\"},\"p12\":{\"$ref\":\"#/$defs/l5\"},\"p13\":{\"$ref\":\"#/$defs/l5\"},\"p"
    "14\":{\"$ref\":\"#/$defs/l5\"},\"p15\":{\"$ref\":\"#/$defs/l5\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\",\"p5\""
    ",\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l5\":{\"type\":\"object\",\"properties\":{\""
    "p0\":{\"$ref\":\"#/$defs/l6\"},\"p1\":{\"$ref\":\"#/$defs/l6\"},\"p2\":{\"$ref\":\"#/$defs/l6\"},\"p3\":{\"$ref\":\"#/"
    "$defs/l6\"},\"p4\":{\"$ref\":\"#/$defs/l6\"},\"p5\":{\"$ref\":\"#/$defs/l6\"},\"p6\":{\"$ref\":\"#/$defs/l6\"},\"p7\""
    ":{\"$ref\":\"#/$defs/l6\"},\"p8\":{\"$ref\":\"#/$defs/l6\"},\"p9\":{\"$ref\":\"#/$defs/l6\"},\"p10\":{\"$ref\":\"#/$d"
    "efs/l6\"},\"p11\":{\"$ref\":\"#/$defs/l6\"},\"p12\":{\"$ref\":\"#/$defs/l6\"},\"p13\":{\"$ref\":\"#/$defs/l6\"},\"p1"
    "4\":{\"$ref\":\"#/$defs/l6\"},\"p15\":{\"$ref\":\"#/$defs/l6\"}},\"required\":[\"p0\",\"p1\",\"p2\",\"p3\",\"p4\",\"p5\","
    "\"p6\",\"p7\",\"p8\",\"p9\",\"p10\",\"p11\",\"p12\",\"p13\",\"p14\",\"p15\"]},\"l6\":{\"const\":\"xxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}}},{\"name\":\"ref_loop\",\"description\":\"a $ref cycle th"
    "at fans out\",\"parameters\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"$ref\":\"#\"},\""
    "b\":{\"$ref\":\"#\"}}}},{\"name\":\"huge_int\",\"description\":\"an integer of at least 1e308\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1e+308}},\"required\":[\"n\"]}},{\"nam"
    "e\":\"bad_pattern\",\"description\":\"a pattern no sample matches\",\"parameters\":{\"type\":\"object\",\"prop"
    "erties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^(a|aa)+$\",\"minLength\":3}},\"required\":[\"s\"]}}]}")
  (func (export "morph_describe") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 5176)))
  (data (i32.const 7168) "{\"output\":\"ok\"}")
  (func (export "morph_call_tool") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 7168) (i64.const 32)) (i64.const 15))))
