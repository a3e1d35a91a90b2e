"""The C/C++ stripper blanks comments and literals, keeps code, includes and line numbers."""

from fibserve.build.c_source import strip_c_source


def test_comments_and_strings_are_blanked_but_code_and_lines_kept() -> None:
    source = (
        "#include <cublas_v2.h>\n"
        "// cublasGemmEx in a comment \\\n"
        "continued cublasCreate\n"
        "int x = 1'000; /* cudnn\n"
        ' */ const char* m = "cublasGemmEx \\" still string";\n'
        'auto r = R"tag(cutlass:: )" )tag"; realCall();\n'
        "char c = '\\''; auto w = L'x'; auto u = u8\"cute::\";\n"
    )
    stripped = strip_c_source(source)
    assert len(stripped.code) == len(source)
    assert stripped.code.count("\n") == source.count("\n")
    for hidden in ("cublasGemmEx", "cublasCreate", "cudnn", "cutlass", "still string", "cute"):
        assert hidden not in stripped.code.split("\n", 1)[1], hidden
    assert "int x = 1'000;" in stripped.code  # a digit separator is not a char literal
    assert "realCall();" in stripped.code
    assert list(stripped.includes()) == [(1, "cublas_v2.h")]


def test_include_inside_comment_is_not_an_include() -> None:
    stripped = strip_c_source('/*\n#include <cudnn.h>\n*/\n  #  include "cutlass/gemm.h"\n')
    assert list(stripped.includes()) == [(4, "cutlass/gemm.h")]
    assert stripped.line_of(stripped.code.index("include")) == 4


def test_unterminated_string_does_not_swallow_the_file() -> None:
    stripped = strip_c_source('const char* s = "oops\ncublasCreate(&h);\n')
    assert "cublasCreate(&h);" in stripped.code


def test_includes_are_found_as_the_preprocessor_reads_them() -> None:
    """Each of these was skipped by the include policy (the compiler's sandbox held, but the policy must see
    what the preprocessor sees): after a comment, as a digraph or trigraph, as #import, spliced."""
    source = (
        '/* lead */ #include "/etc/hostname"\n'
        "%:include </proc/self/environ>\n"
        "??=include <../up.h>\n"
        '#import "cublas_v2.h"\n'
        "#inc\\\nlude <spliced.h>\n"
        "  #  include_next <next.h>\n"
        "// #include <commented.h>\n"
        'const char* s = "#include <in_a_string.h>";\n'
    )
    stripped = strip_c_source(source)
    assert list(stripped.includes()) == [
        (1, "/etc/hostname"),
        (2, "/proc/self/environ"),
        (3, "../up.h"),
        (4, "cublas_v2.h"),
        (5, "spliced.h"),
        (7, "next.h"),
    ]


def test_a_directive_without_a_header_name_is_a_computed_include() -> None:
    stripped = strip_c_source("#define H <cublas_v2.h>\n/* x */ %:include H\n")
    assert list(stripped.includes()) == [] and list(stripped.computed_includes()) == [(2, "H")]
