"""Static analysis of built candidates: PTX instruction families, SASS opcodes, ptxas resources, verdicts.

Everything here reads build products (PTX text, cubins, the ptxas log); nothing runs a kernel.
"""
