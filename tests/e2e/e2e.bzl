"""One cc_test per scenario of the suite, each running one gtest case."""

def scenario_test(name, test_filter, data):
    native.cc_test(
        name = name + "_test",
        size = "large",
        data = data,
        args = ["--gtest_filter=" + test_filter],
        tags = [
            "e2e",
            "exclusive",
            "nocuda",
        ],
        deps = [
            ":scenario_suite",
            "@system_libs//:gtest_main",
        ],
    )
