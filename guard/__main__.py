from guard.entry import main

main()
