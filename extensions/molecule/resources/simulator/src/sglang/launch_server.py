"""Launch the server: ``python -m sglang.launch_server --model-path ... [options]``.

In this build it runs the SGLang simulator (see sglang._sim), a test double that needs no GPU.
"""

if __name__ == "__main__":
    from sglang._sim.server import main

    main()
