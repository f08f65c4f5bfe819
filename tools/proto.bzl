"""grpc_cc_library: C++ protobuf + gRPC code from the system protoc (no rules_proto; offline).

grpc_cc_library(name, src, proto_deps = [], deps = [])
  src:        one .proto file in this package, imported workspace-relative ("proto/falcon/v1/x.proto").
  proto_deps: other grpc_cc_library targets whose .proto files `src` imports.
Produces <name> (cc_library with x.pb.h, x.grpc.pb.h) and <name>_proto_files (the .proto files,
transitively), so dependent genrules see their imports. Uses /usr/bin/protoc, which matches
libprotobuf 3.21.12 (Debian 12): generated code must come from the protoc of the same release
as the library it links against.
"""

def grpc_cc_library(name, src, proto_deps = [], deps = [], visibility = None):
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    native.filegroup(
        name = name + "_proto_files",
        srcs = [src] + [d + "_proto_files" for d in proto_deps],
        visibility = visibility,
    )
    native.genrule(
        name = name + "_gen",
        srcs = [src, name + "_proto_files"],
        outs = outs,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin $(location %s)") % src,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        copts = ["-Wno-unused-parameter"],
        deps = proto_deps + deps + ["@system_libs//:grpc"],
        visibility = visibility,
    )
