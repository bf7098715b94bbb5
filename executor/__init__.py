"""codepool executor: the job contract, the nsjail sandbox and the worker process."""
