"""The worker: ``python worker.py`` (the Procfile's ``worker``).

It converts queued tasks with warm LibreOffice processes and runs the
service's periodic duties; see ``docshift.tasks.worker``. Importing this file
starts nothing.
"""

if __name__ == "__main__":
    from docshift.tasks.worker import main

    main()
